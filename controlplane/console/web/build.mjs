// build.mjs bundles the console (src/) into one minified JS and one CSS file with content
// hashes in their names, and writes index.html naming them (controlplane/console/dist by
// default, or the directory given as the first argument). The output depends only on the
// sources and the locked packages, so .ci/gen-check can rebuild and compare it with the
// committed dist/.
import * as esbuild from "esbuild";
import { mkdirSync, readdirSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] ?? path.join(here, "..", "dist"));

// The generated client in clients/ts/gen imports @bufbuild/protobuf; resolve every import of it
// (and of the Connect packages) from this package's node_modules so the bundle holds one copy.
const oneCopy = {
  name: "one-copy",
  setup(build) {
    build.onResolve({ filter: /^@(bufbuild|connectrpc)\// }, (args) => {
      if (args.resolveDir === here) return undefined;
      return build.resolve(args.path, { kind: args.kind, resolveDir: here });
    });
  },
};

mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) {
  if (f === "index.html" || f === "assets") rmSync(path.join(out, f), { recursive: true, force: true });
}

const result = await esbuild.build({
  entryPoints: { app: path.join(here, "src", "main.ts"), style: path.join(here, "src", "style.css") },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022"],
  platform: "browser",
  outdir: path.join(out, "assets"),
  entryNames: "[name]-[hash]",
  legalComments: "none",
  charset: "utf8",
  metafile: true,
  sourcemap: false,
  logLevel: "warning",
  plugins: [oneCopy],
  absWorkingDir: here,
});

// One copy of each runtime package: two would mean a second @bufbuild/protobuf (whose message
// registry and instanceof checks would not match the first).
const roots = new Set(Object.keys(result.metafile.inputs)
  .map((p) => /^(.*node_modules\/@(?:bufbuild|connectrpc)\/[^/]+)\//.exec(p)?.[1])
  .filter(Boolean));
const names = [...roots].map((r) => r.replace(/^.*node_modules\//, ""));
if (process.env.CONSOLE_BUILD_DEBUG) console.log(roots);
if (new Set(names).size !== names.length) throw new Error(`build: more than one copy of a package in the bundle: ${[...roots].join(", ")}`);

const outputs = Object.keys(result.metafile.outputs).map((p) => path.basename(p));
const js = outputs.find((f) => f.startsWith("app-") && f.endsWith(".js"));
const css = outputs.find((f) => f.startsWith("style-") && f.endsWith(".css"));
if (!js || !css) throw new Error(`build: expected app-*.js and style-*.css, got ${outputs.join(", ")}`);

const html = readFileSync(path.join(here, "src", "index.html"), "utf8")
  .replace("{{CSS}}", `/assets/${css}`)
  .replace("{{JS}}", `/assets/${js}`);
writeFileSync(path.join(out, "index.html"), html);

let gz = gzipSync(html).length;
for (const f of [js, css]) gz += gzipSync(readFileSync(path.join(out, "assets", f))).length;
console.log(`console: built ${out} (${js}, ${css}); ${gz} bytes gzipped`);
