'use strict';
// Shared code of the rbook Action's node24 entry points (main.js, post.js): pick the release
// archive for this runner, download it (redirects, a timeout and a size cap), verify its
// SHA-256 against the checksums committed in release.json, unpack it (a minimal tar reader:
// regular files only, no path that leaves the folder), cache it in the runner's tool cache,
// or build rbook from source with the Go on the runner (docs/action.md, "How the Action runs rbook").
// Node's built-ins only, committed as it runs: no dependencies, no bundler.

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');

/** Largest archive the shim downloads (bytes); a larger answer is refused while it arrives. */
const MAX_ARCHIVE_BYTES = 100 * 1024 * 1024;
/** Largest unpacked archive (bytes): a gzip bomb is refused, not unpacked. */
const MAX_UNPACKED_BYTES = 300 * 1024 * 1024;
/** How long one download may take in all, redirects included (milliseconds). */
const DOWNLOAD_TIMEOUT_MS = 120 * 1000;
/** How many redirects a download follows (GitHub's release downloads redirect once). */
const MAX_REDIRECTS = 5;

/** A release tag release.json may name: vMAJOR.MINOR.PATCH with an optional -pre/+build suffix (it becomes a URL part and a tool-cache folder). */
const VERSION_RE = /^v[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]+)?$/;
/** The verified release archive kept in each tool-cache folder: every cache hit is re-checked against it. */
const CACHED_ARCHIVE = '.rbook-verified-archive.tar.gz';

/** ShimError is an error whose message is for the job's log; fallback marks "no release here". */
class ShimError extends Error {
  constructor(message, { fallback = false } = {}) {
    super(message);
    this.fallback = fallback;
  }
}

/**
 * input returns the action input `name` as GitHub passes it to a node action: the variable
 * INPUT_<NAME upper-cased, spaces as _> (dashes kept), trimmed; def when it is unset or empty.
 */
function input(name, def = '', env = process.env) {
  const v = env['INPUT_' + name.replace(/ /g, '_').toUpperCase()];
  return v === undefined || v.trim() === '' ? def : v.trim();
}

/**
 * target maps the runner to a release target: { os: linux|darwin|windows, arch: amd64|arm64,
 * exe: "rbook" or "rbook.exe" }, from RUNNER_OS/RUNNER_ARCH (Linux, macOS, Windows; X64, ARM64)
 * or else process.platform/process.arch. Throws ShimError for any other OS or architecture.
 */
function target(env = process.env, platform = process.platform, arch = process.arch) {
  const osName = { Linux: 'linux', macOS: 'darwin', Windows: 'windows' }[env.RUNNER_OS] ||
    { linux: 'linux', darwin: 'darwin', win32: 'windows' }[platform];
  const archName = { X64: 'amd64', ARM64: 'arm64' }[env.RUNNER_ARCH] || { x64: 'amd64', arm64: 'arm64' }[arch];
  if (!osName || !archName) {
    throw new ShimError(`rbook has no release for this runner (${env.RUNNER_OS || platform}/${env.RUNNER_ARCH || arch}): ` +
      'releases exist for linux, darwin and windows on amd64 and arm64; set build-from-source: true to build it with Go');
  }
  return { os: osName, arch: archName, exe: osName === 'windows' ? 'rbook.exe' : 'rbook' };
}

/** archiveName is the release asset for version and target t: rbook_<version>_<os>_<arch>.tar.gz. */
function archiveName(version, t) {
  return `rbook_${version}_${t.os}_${t.arch}.tar.gz`;
}

/**
 * readRelease reads release.json next to this file: { version: "vX.Y.Z" or "", archives:
 * { "<archive>": "<64 hex sha256>" }, binaries: { "<archive>": "<64 hex sha256 of the rbook
 * binary inside>" } (optional: it lets a cache hit check the binary alone, without unpacking) }. Throws ShimError naming the file when it is unreadable
 * or malformed (a version that is not a release tag like v1.2.3 — it becomes a URL part and
 * a tool-cache folder — or a checksum that is not 64 lowercase hex characters is malformed).
 */
function readRelease(file = path.join(__dirname, 'release.json')) {
  let r;
  try {
    r = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ShimError(`${file}: cannot read the release checksums: ${e.message}`);
  }
  if (typeof r !== 'object' || r === null || typeof (r.version ?? '') !== 'string' ||
      typeof (r.archives ?? {}) !== 'object' || Array.isArray(r.archives)) {
    throw new ShimError(`${file}: want {"version": "vX.Y.Z", "archives": {"<archive>": "<sha256>"}}`);
  }
  if (r.version && !VERSION_RE.test(r.version)) {
    throw new ShimError(`${file}: version ${JSON.stringify(r.version)} is not a release tag like v1.2.3`);
  }
  const archives = r.archives || {};
  const binaries = r.binaries || {};
  if (typeof binaries !== 'object' || Array.isArray(binaries)) {
    throw new ShimError(`${file}: binaries must be an object {"<archive>": "<sha256 of its rbook binary>"}`);
  }
  for (const [field, sums] of [['archives', archives], ['binaries', binaries]]) {
    for (const [name, sum] of Object.entries(sums)) {
      if (typeof sum !== 'string' || !/^[0-9a-f]{64}$/.test(sum)) {
        throw new ShimError(`${file}: ${field}["${name}"]: the checksum must be 64 lowercase hex characters (SHA-256)`);
      }
    }
  }
  return { version: r.version || '', archives, binaries };
}

/** sha256 returns the hex SHA-256 of a Buffer. */
function sha256(buf) {
  return crypto.createHash('sha256').update(buf).digest('hex');
}

/**
 * download GETs url and resolves with the body (a Buffer), following up to MAX_REDIRECTS
 * redirects (never from https to http), within DOWNLOAD_TIMEOUT_MS in all and MAX_ARCHIVE_BYTES.
 * Rejects with ShimError; a 404 has fallback=true (the ref has no release).
 */
function download(url, { timeoutMs = DOWNLOAD_TIMEOUT_MS, maxBytes = MAX_ARCHIVE_BYTES, maxRedirects = MAX_REDIRECTS } = {}) {
  const deadline = Date.now() + timeoutMs;
  const get = (u, left) => new Promise((resolve, reject) => {
    let parsed;
    try {
      parsed = new URL(u);
    } catch {
      return reject(new ShimError(`download: ${u} is not a URL`));
    }
    const mod = parsed.protocol === 'https:' ? https : parsed.protocol === 'http:' ? http : null;
    if (!mod) return reject(new ShimError(`download: ${u}: only http and https are followed`));
    const req = mod.get(parsed, { headers: { 'User-Agent': 'rbook-action-shim', Accept: 'application/octet-stream' } }, (res) => {
      const code = res.statusCode;
      if ([301, 302, 303, 307, 308].includes(code)) {
        res.resume();
        const loc = res.headers.location;
        if (!loc) return reject(new ShimError(`download: ${u}: HTTP ${code} without a Location`));
        if (left <= 0) return reject(new ShimError(`download: ${u}: more than ${maxRedirects} redirects`));
        const next = new URL(loc, parsed).toString();
        if (parsed.protocol === 'https:' && next.startsWith('http:')) {
          return reject(new ShimError(`download: ${u} redirects from https to http (${next}); refused`));
        }
        return get(next, left - 1).then(resolve, reject);
      }
      if (code === 404) {
        res.resume();
        return reject(new ShimError(`download: ${u}: HTTP 404 (no such release asset)`, { fallback: true }));
      }
      if (code !== 200) {
        res.resume();
        return reject(new ShimError(`download: ${u}: HTTP ${code}`));
      }
      const declared = Number(res.headers['content-length']);
      if (declared > maxBytes) {
        res.destroy();
        return reject(new ShimError(`download: ${u}: ${declared} bytes, over the limit of ${maxBytes}`));
      }
      const chunks = [];
      let n = 0;
      res.on('data', (c) => {
        n += c.length;
        if (n > maxBytes) {
          res.destroy();
          reject(new ShimError(`download: ${u}: over the limit of ${maxBytes} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', (e) => reject(new ShimError(`download: ${u}: ${e.message}`)));
    });
    const left_ms = deadline - Date.now();
    const timer = setTimeout(() => req.destroy(new Error(`no complete answer within ${timeoutMs} ms`)), Math.max(left_ms, 1));
    req.on('close', () => clearTimeout(timer));
    req.on('error', (e) => reject(new ShimError(`download: ${u}: ${e.message}`)));
  });
  return get(url, maxRedirects);
}

/**
 * safeEntryPath checks a tar entry name: relative, no ".." component, no drive, backslash or
 * colon (an NTFS alternate data stream) tricks. Returns the name with "/" separators; throws ShimError otherwise.
 */
function safeEntryPath(name) {
  const n = name.replace(/^\.\//, '');
  if (n === '' || n.startsWith('/') || n.includes(':') || n.includes('\\') || n.includes('\0') ||
      n.split('/').some((p) => p === '..')) {
    throw new ShimError(`archive entry "${name}": refused (absolute, or leaves the folder)`);
  }
  return n;
}

function octal(buf, start, len) {
  const s = buf.toString('latin1', start, start + len).replace(/\0.*$/s, '').trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new ShimError(`archive: a header field is not octal (${JSON.stringify(s)})`);
  return parseInt(s, 8);
}

/**
 * tarEntries reads a .tar.gz Buffer: regular files only (directories and pax headers are
 * passed over; links, devices and anything else are refused), at most MAX_UNPACKED_BYTES,
 * every path checked by safeEntryPath. Returns [{ rel, mode, body }] in archive order.
 */
function tarEntries(buf, { maxBytes = MAX_UNPACKED_BYTES } = {}) {
  let tar;
  try {
    tar = zlib.gunzipSync(buf, { maxOutputLength: maxBytes });
  } catch (e) {
    throw new ShimError(`archive: cannot gunzip (${e.code === 'ERR_BUFFER_TOO_LARGE' ? `over ${maxBytes} bytes unpacked` : e.message})`);
  }
  const files = [];
  for (let off = 0; off + 512 <= tar.length;) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break; // end of archive
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    if (sum !== octal(h, 148, 8)) throw new ShimError(`archive: bad header checksum at offset ${off}`);
    let name = h.toString('utf8', 0, 100).replace(/\0.*$/s, '');
    if (h.toString('latin1', 257, 262) === 'ustar') {
      const prefix = h.toString('utf8', 345, 500).replace(/\0.*$/s, '');
      if (prefix) name = prefix + '/' + name;
    }
    const size = octal(h, 124, 12);
    const type = String.fromCharCode(h[156] || 48);
    const body = off + 512;
    if (body + size > tar.length) throw new ShimError(`archive: entry "${name}" is truncated`);
    off = body + Math.ceil(size / 512) * 512;
    if (type === '5' || type === 'x' || type === 'g') continue;
    if (type !== '0') throw new ShimError(`archive entry "${name}": type ${JSON.stringify(type)} refused (regular files only)`);
    files.push({ rel: safeEntryPath(name), mode: octal(h, 100, 8) & 0o755 || 0o644, body: tar.subarray(body, body + size) });
  }
  return files;
}

/**
 * untarGz unpacks a .tar.gz Buffer into dest as tarEntries reads it. Returns the list of files
 * written (relative names).
 */
function untarGz(buf, dest, opts = {}) {
  const files = [];
  for (const { rel, mode, body } of tarEntries(buf, opts)) {
    const out = path.join(dest, ...rel.split('/'));
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, body, { mode });
    files.push(rel);
  }
  return files;
}

/**
 * cacheDir is where version's binary for t lives in the tool cache, as actions/tool-cache lays
 * it out: <RUNNER_TOOL_CACHE>/rbook/<version without v>/<arch>, complete once <dir>.complete exists.
 */
function cacheDir(env, version, t) {
  const root = env.RUNNER_TOOL_CACHE || path.join(env.RUNNER_TEMP || os.tmpdir(), 'rbook-tool-cache');
  return path.join(root, 'rbook', version.replace(/^v/, ''), t.arch);
}

/**
 * cached returns the cached binary's path when dir holds a verified install of the archive
 * with checksum archiveSum: the archive kept beside the binary (CACHED_ARCHIVE) still has the
 * committed checksum, and the binary is byte for byte the one in that archive — or, when
 * release.json commits the binary's own checksum (binarySum), the binary has it. Nothing in
 * the cache is trusted on its own (another job on a self-hosted runner could have rewritten
 * the binary and <dir>.complete together). null otherwise; nothing is fetched.
 */
function cached(dir, t, archiveSum, binarySum = '') {
  try {
    const bin = path.join(dir, t.exe);
    if (binarySum) return sha256(fs.readFileSync(bin)) === binarySum ? bin : null;
    const archive = fs.readFileSync(path.join(dir, CACHED_ARCHIVE));
    if (sha256(archive) !== archiveSum) return null;
    const entry = tarEntries(archive).filter((e) => e.rel === t.exe).pop();
    if (!entry || sha256(fs.readFileSync(bin)) !== sha256(entry.body)) return null;
    return bin;
  } catch {
    return null;
  }
}

/**
 * install unpacks a verified archive into the tool cache: a temp folder beside dir (with the
 * archive itself as CACHED_ARCHIVE), renamed into place, then the marker <dir>.complete
 * (the archive's and the binary's checksums, as actions/tool-cache expects a marker). Jobs
 * sharing the cache may install at once: a folder another job finished first is used, a
 * stale one is moved aside (never deleted under a running job). Returns the binary's path.
 * Throws ShimError when the archive has no rbook binary or the folder cannot be put in place.
 */
function install(dir, t, archive, archiveSum, binarySum = '') {
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const rand = () => crypto.randomBytes(6).toString('hex');
  const tmp = `${dir}.tmp-${rand()}`;
  try {
    const files = untarGz(archive, tmp);
    if (!files.includes(t.exe)) throw new ShimError(`archive: no ${t.exe} at its top level (it holds ${files.join(', ') || 'nothing'})`);
    if (files.includes(CACHED_ARCHIVE)) throw new ShimError(`archive: it holds ${CACHED_ARCHIVE}, a name the shim keeps for itself`);
    fs.writeFileSync(path.join(tmp, CACHED_ARCHIVE), archive);
    const binSum = sha256(fs.readFileSync(path.join(tmp, t.exe)));
    if (binarySum && binSum !== binarySum) {
      throw new ShimError(`archive: its ${t.exe} has SHA-256 ${binSum}, not the ${binarySum} committed in release.json; refusing it`);
    }
    const bin = path.join(dir, t.exe);
    if (cached(dir, t, archiveSum, binarySum)) return bin; // another job put the same archive in place
    const old = `${dir}.old-${rand()}`;
    try {
      fs.renameSync(dir, old); // a stale or tampered folder: moved aside in one step
    } catch (e) {
      if (e.code !== 'ENOENT') throw new ShimError(`tool cache: cannot move the stale ${dir} aside: ${e.message}`);
    }
    fs.rmSync(old, { recursive: true, force: true, maxRetries: 2 });
    try {
      fs.renameSync(tmp, dir);
    } catch (e) {
      if (cached(dir, t, archiveSum, binarySum)) return bin; // lost the race to a job installing the same archive
      throw new ShimError(`tool cache: cannot put ${dir} in place: ${e.message}`);
    }
    const marker = `${dir}.complete.tmp-${rand()}`;
    fs.writeFileSync(marker, JSON.stringify({ archive_sha256: archiveSum, binary_sha256: binSum }) + '\n');
    fs.renameSync(marker, dir + '.complete');
    return bin;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * buildFromSource builds rbook with the Go on the runner: go build -trimpath -o <tmp>/rbook
 * ./cmd/rbook in actionPath. Returns the binary's path; throws ShimError when Go is missing or
 * the build fails (its output went to the log).
 */
function buildFromSource(actionPath, env, t, log) {
  const dir = fs.mkdtempSync(path.join(env.RUNNER_TEMP || os.tmpdir(), 'rbook-build-'));
  const out = path.join(dir, t.exe);
  log(`Building rbook from source in ${actionPath} with the Go on the runner…`);
  const r = spawnSync('go', ['build', '-trimpath', '-o', out, './cmd/rbook'], { cwd: actionPath, stdio: ['ignore', 'inherit', 'inherit'], env });
  if (r.error && r.error.code === 'ENOENT') {
    throw new ShimError("building rbook from source needs Go on the runner, and 'go' is not on PATH: add actions/setup-go (go-version-file: go.mod) before this step, or use a released version of the action");
  }
  if (r.error) throw new ShimError(`go build: ${r.error.message}`);
  if (r.status !== 0) throw new ShimError(`go build -trimpath -o ${out} ./cmd/rbook failed (exit ${r.status}); its output is above`);
  return out;
}

/**
 * resolveBinary returns { bin, how } for this job: the cached or downloaded release binary,
 * or one built from source when build-from-source is true or the ref has no release (no
 * version in release.json, GITHUB_ACTION_REF empty as for `uses: ./`, or HTTP 404). A missing
 * checksum entry or a mismatch is refused (ShimError) and never falls back.
 */
async function resolveBinary({ env = process.env, actionPath, releaseFile, log = console.log } = {}) {
  const t = target(env);
  actionPath = actionPath || env.GITHUB_ACTION_PATH || path.resolve(__dirname, '..', '..');
  if (/^true$/i.test(input('build-from-source', 'false', env))) {
    return { bin: buildFromSource(actionPath, env, t, log), how: 'built from source (build-from-source: true)' };
  }
  const rel = readRelease(releaseFile);
  if (!rel.version) {
    log('release.json names no release for this ref: building rbook from source.');
    return { bin: buildFromSource(actionPath, env, t, log), how: 'built from source (no release for this ref)' };
  }
  if (!env.GITHUB_ACTION_REF || !env.GITHUB_ACTION_REPOSITORY) {
    log('The action runs from a local path (uses: ./…), which has no release: building rbook from source.');
    return { bin: buildFromSource(actionPath, env, t, log), how: 'built from source (local action)' };
  }
  const name = archiveName(rel.version, t);
  const want = rel.archives[name];
  if (!want) {
    throw new ShimError(`release.json has no checksum for ${name}: refusing to run an unverified binary (the checksums are committed with each release)`);
  }
  const dir = cacheDir(env, rel.version, t);
  const wantBin = rel.binaries[name] || '';
  const hit = cached(dir, t, want, wantBin);
  if (hit) return { bin: hit, how: `rbook ${rel.version} from the tool cache (${dir})` };
  const server = (env.GITHUB_SERVER_URL || 'https://github.com').replace(/\/+$/, '');
  const url = `${server}/${env.GITHUB_ACTION_REPOSITORY}/releases/download/${rel.version}/${name}`;
  let archive;
  try {
    archive = await download(url);
  } catch (e) {
    if (e.fallback) {
      log(`${e.message}: building rbook from source instead.`);
      return { bin: buildFromSource(actionPath, env, t, log), how: 'built from source (the release has no such asset)' };
    }
    throw e;
  }
  const got = sha256(archive);
  if (!crypto.timingSafeEqual(Buffer.from(got), Buffer.from(want))) {
    throw new ShimError(`${name}: SHA-256 ${got} does not match the committed checksum ${want} (release.json): refusing to run it`);
  }
  return { bin: install(dir, t, archive, want, wantBin), how: `rbook ${rel.version} downloaded and verified (SHA-256 ${want})` };
}

/**
 * saveState appends name=value to the GITHUB_STATE file command with a random heredoc
 * delimiter (refused if it occurs in the value), so post.js gets it as STATE_<name>.
 */
function saveState(name, value, env = process.env) {
  if (!env.GITHUB_STATE) return;
  const delim = `ghadelimiter_${crypto.randomUUID()}`;
  if (value.includes(delim) || name.includes(delim)) throw new ShimError(`state ${name}: the value contains the delimiter`);
  fs.appendFileSync(env.GITHUB_STATE, `${name}<<${delim}${os.EOL}${value}${os.EOL}${delim}${os.EOL}`);
}

/**
 * rbookEnv is the environment rbook runs with: the job's, with the inputs as rbook's own
 * variables (RBOOK_CONTROL_PLANE, RBOOK_TOKEN, RBOOK_OIDC_AUDIENCE), and the token input's
 * INPUT_ variable removed, so the MCP servers rbook starts do not inherit it under that name.
 */
function rbookEnv(env = process.env) {
  const out = { ...env };
  out.RBOOK_CONTROL_PLANE = input('control-plane', 'off', env);
  const token = input('control-plane-token', '', env);
  if (token) out.RBOOK_TOKEN = token;
  const aud = input('oidc-audience', '', env);
  if (aud) out.RBOOK_OIDC_AUDIENCE = aud;
  // docs/approvals.md, "Approve in GitHub": the gate mode (wait | pause; rbook refuses anything else) and the GitHub
  // environment the run's gates are bound to.
  out.RBOOK_GATE_MODE = input('gate-mode', 'wait', env);
  const environment = input('environment', '', env);
  if (environment) out.RBOOK_GITHUB_ENVIRONMENT = environment;
  delete out['INPUT_CONTROL-PLANE-TOKEN'];
  return out;
}

/**
 * rbookVerb is the main step's rbook verb from the input verb: ["run"] (the default) or
 * ["resume"] (docs/approvals.md, "Pause mode": continue a run paused at a gate). Throws ShimError otherwise.
 */
function rbookVerb(env = process.env) {
  const verb = input('verb', 'run', env);
  if (verb !== 'run' && verb !== 'resume') throw new ShimError(`input verb: ${JSON.stringify(verb)} is not run or resume`);
  // docs/playbooks.md, "The Action": playbook: path.cantbook runs `rbook playbook run`.
  const playbook = input('playbook', '', env);
  if (playbook !== '') {
    if (input('runbook', '', env) !== '') throw new ShimError('inputs runbook and playbook are mutually exclusive: set one of them');
    if (verb !== 'run') throw new ShimError(`input verb: ${JSON.stringify(verb)} is for runbooks; a playbook runs (and resumes) with verb run`);
    return ['playbook', 'run'];
  }
  if (input('inputs', '', env) !== '') throw new ShimError('input inputs is for a playbook: set playbook too, or drop inputs');
  return [verb];
}

/**
 * playbookInputs turns the input inputs (one NAME=VALUE per line; blank lines and lines that
 * start with # are skipped) into rbook's --input=NAME=VALUE arguments, each one argument.
 * Throws ShimError naming the line for a line without "=" or with an empty NAME.
 */
function playbookInputs(env = process.env) {
  const text = input('inputs', '', env);
  const args = [];
  text.split(/\r?\n/).forEach((line, i) => {
    const l = line.trim();
    if (l === '' || l.startsWith('#')) return;
    const eq = l.indexOf('=');
    if (eq <= 0) throw new ShimError(`input inputs, line ${i + 1}: ${JSON.stringify(l)} is not NAME=VALUE`);
    args.push(`--input=${l}`);
  });
  return args;
}

/**
 * rbookArgs is rbook's argument list for verb (["run"], ["resume"] or ["github", "post"])
 * from the inputs runbook, dir, (for run) step-index and (for resume) run-id: each one
 * argument, "--" before RUNBOOK so a name that starts with "-" is not taken for a flag.
 * Nothing goes through a shell.
 */
function rbookArgs(verb, env = process.env) {
  if (verb[0] === 'playbook') {
    return [...verb, ...playbookInputs(env), `--report=${reportPath(env)}`, '--', input('playbook', '', env)];
  }
  const args = [...verb, `--dir=${input('dir', 'runbooks', env)}`];
  const step = input('step-index', '', env);
  if (verb[0] === 'run' && step !== '') args.push(`--step-index=${step}`);
  const runID = input('run-id', '', env);
  if (verb[0] === 'resume' && runID !== '') args.push(`--run-id=${runID}`);
  if (verb[0] === 'run' || verb[0] === 'resume') args.push(`--report=${reportPath(env)}`);
  args.push('--', input('runbook', 'prod', env));
  return args;
}

/**
 * planArgs is the argument list of `rbook plan` the main step runs before verb when the input
 * plan is "true" (docs/plan.md, "In the Action"): the same runbook or playbook, --dir and
 * inputs as the run, and --summary, so the plan is in the job summary before the run starts
 * (and not in the log, where a runbook's text could be read as a workflow command). null when plan is not "true", and for verb resume (a paused run's plan is already
 * in the earlier job's summary). Throws ShimError for a plan input other than true or false.
 */
function planArgs(verb, env = process.env) {
  const plan = input('plan', 'false', env);
  if (!/^(true|false)$/i.test(plan)) throw new ShimError(`input plan: ${JSON.stringify(plan)} is not true or false`);
  if (!/^true$/i.test(plan) || verb[0] === 'resume') return null;
  if (verb[0] === 'playbook') {
    return ['plan', '--summary', ...playbookInputs(env), '--', input('playbook', '', env)];
  }
  return ['plan', '--summary', `--dir=${input('dir', 'runbooks', env)}`, '--', input('runbook', 'prod', env)];
}

/**
 * reportPath is where `rbook run` writes the Markdown report (the step output report-path):
 * the input report, else <RUNNER_TEMP>/rbook/<runbook>.report.md (the folder is created; the
 * runbook name is reduced to [A-Za-z0-9._-] so it cannot leave that folder).
 */
function reportPath(env = process.env) {
  const given = input('report', '', env);
  if (given !== '') return given;
  const path = require('node:path');
  const dir = path.join(env.RUNNER_TEMP || require('node:os').tmpdir(), 'rbook');
  require('node:fs').mkdirSync(dir, { recursive: true });
  const playbook = input('playbook', '', env);
  const base = playbook !== '' ? path.basename(playbook).replace(/\.cantbook$/, '') : input('runbook', 'prod', env);
  const name = base.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
  return path.join(dir, `${name}.report.md`);
}

/**
 * runForwarding starts bin with args (no shell, stdin ignored, stdout and stderr the job's),
 * forwards SIGINT and SIGTERM to it (so rbook records run_interrupted), and resolves with
 * the exit code the shim should exit with (exitCodeOf). Rejects when bin cannot be started.
 */
function runForwarding(bin, args, env) {
  return new Promise((resolve, reject) => {
    const child = require('node:child_process').spawn(bin, args, { stdio: ['ignore', 'inherit', 'inherit'], env, shell: false });
    const forward = (sig) => () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    };
    const handlers = { SIGINT: forward('SIGINT'), SIGTERM: forward('SIGTERM') };
    for (const [sig, h] of Object.entries(handlers)) process.on(sig, h);
    const done = () => { for (const [sig, h] of Object.entries(handlers)) process.removeListener(sig, h); };
    child.on('error', (e) => { done(); reject(new ShimError(`cannot start ${bin}: ${e.message}`)); });
    child.on('exit', (code, signal) => { done(); resolve(exitCodeOf(code, signal)); });
  });
}

/** exitCodeOf maps a child's exit to the shim's: its code, 128+n for signal n, else 1. */
function exitCodeOf(code, signal) {
  if (code !== null && code !== undefined) return code;
  const n = signal && os.constants.signals[signal];
  return n ? 128 + n : 1;
}

module.exports = {
  MAX_ARCHIVE_BYTES, MAX_UNPACKED_BYTES, DOWNLOAD_TIMEOUT_MS, MAX_REDIRECTS, ShimError,
  VERSION_RE, CACHED_ARCHIVE, input, target, archiveName, readRelease, sha256, download, safeEntryPath, tarEntries, untarGz, cacheDir, cached, install,
  buildFromSource, resolveBinary, saveState, rbookEnv, rbookVerb, rbookArgs, planArgs, playbookInputs, reportPath, runForwarding, exitCodeOf,
};
