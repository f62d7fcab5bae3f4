// run.mjs bundles test/*.test.ts with esbuild (as the app is bundled, one copy of each
// package) into a temporary folder and runs them with Node's test runner: `npm test`.
import * as esbuild from "esbuild";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.dirname(here);
const out = mkdtempSync(path.join(tmpdir(), "rbook-console-test-"));
try {
  const entries = readdirSync(here).filter((f) => f.endsWith(".test.ts")).map((f) => path.join(here, f));
  await esbuild.build({
    entryPoints: entries,
    bundle: true,
    format: "esm",
    platform: "node",
    target: ["node20"],
    outdir: out,
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
    absWorkingDir: web,
    plugins: [{
      name: "one-copy",
      setup(build) {
        build.onResolve({ filter: /^@(bufbuild|connectrpc)\// }, (args) =>
          args.resolveDir === web ? undefined : build.resolve(args.path, { kind: args.kind, resolveDir: web }));
      },
    }],
  });
  const files = readdirSync(out).map((f) => path.join(out, f));
  const r = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
