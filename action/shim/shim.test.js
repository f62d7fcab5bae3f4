'use strict';
// Tests of the Action shim: `node --test action/shim/`. Each test lays out
// an action folder (these files and its own release.json), a fake rbook binary packed as the
// release archive, and a local HTTP server playing GitHub's release download (a redirect to
// the asset), then runs main.js / post.js as the runner would: as a node process with
// INPUT_*, RUNNER_*, GITHUB_* set.
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const test = require('node:test');
const zlib = require('node:zlib');
const lib = require('./lib.js');

const VERSION = 'v9.9.9';
const skipOnWindows = process.platform === 'win32' ? 'the fake rbook is a #! script' : false;

// tarGz packs files ({name: content}) as a ustar .tar.gz, as tools/release does.
function tarGz(files, { type = '0' } = {}) {
  const blocks = [];
  for (const [name, content] of Object.entries(files)) {
    const body = Buffer.from(content);
    const h = Buffer.alloc(512);
    h.write(name, 0, 100, 'utf8');
    h.write('0000755\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    h.write(body.length.toString(8).padStart(11, '0') + '\0', 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write(type, 156);
    h.write('ustar\x0000', 257, 'latin1');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(h, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks));
}

// fakeRbook is a node script standing in for rbook: it records its arguments and the
// variables the shim sets in $FAKE_OUT, then exits as $FAKE_MODE says (exit:N), or waits
// for a signal (wait) and records it in $FAKE_OUT.sig.
function fakeRbook() {
  return `#!${process.execPath}
const fs = require('fs');
fs.writeFileSync(process.env.FAKE_OUT, JSON.stringify({ argv: process.argv.slice(2), cp: process.env.RBOOK_CONTROL_PLANE,
  token: process.env.RBOOK_TOKEN ?? null, inputToken: process.env['INPUT_CONTROL-PLANE-TOKEN'] ?? null, cwd: process.cwd() }));
const mode = process.env.FAKE_MODE || 'exit:0';
if (mode === 'wait') {
  for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => { fs.writeFileSync(process.env.FAKE_OUT + '.sig', s); process.exit(1); });
  console.log('FAKE READY');
  setInterval(() => {}, 1000);
} else {
  process.exit(Number(mode.slice(5)));
}
`;
}

// setup makes a job: an action folder with release.json (archives: sums, default the real
// archive's; binaries: binaries(archiveName) when given), a release server, a tool cache, and the runner's variables.
async function setup(t, { sums, version = VERSION, archive, binaries } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'rbook-shim-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const actionDir = path.join(root, 'action-repo');
  fs.mkdirSync(path.join(actionDir, 'action', 'shim'), { recursive: true });
  for (const f of ['lib.js', 'main.js', 'post.js']) fs.copyFileSync(path.join(__dirname, f), path.join(actionDir, 'action', 'shim', f));
  const env0 = { RUNNER_OS: { linux: 'Linux', darwin: 'macOS', win32: 'Windows' }[process.platform], RUNNER_ARCH: { x64: 'X64', arm64: 'ARM64' }[process.arch] };
  const tgt = lib.target(env0);
  const name = lib.archiveName(version, tgt);
  archive = archive || tarGz({ [tgt.exe]: fakeRbook(), 'README.md': 'rbook\n' });
  fs.writeFileSync(path.join(actionDir, 'action', 'shim', 'release.json'),
    JSON.stringify({ version, archives: sums || { [name]: lib.sha256(archive) }, ...(binaries ? { binaries: binaries(name) } : {}) }));
  const requests = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url);
    if (req.url === `/owner/repo/releases/download/${version}/${name}`) {
      res.writeHead(302, { Location: `/assets/${name}?sig=x` });
      return res.end();
    }
    if (req.url === `/assets/${name}?sig=x`) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': archive.length });
      return res.end(archive);
    }
    res.writeHead(404);
    res.end('not found');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const work = path.join(root, 'work');
  fs.mkdirSync(work);
  const env = {
    ...env0, PATH: process.env.PATH, HOME: root,
    GITHUB_SERVER_URL: `http://127.0.0.1:${server.address().port}`, GITHUB_ACTION_REPOSITORY: 'owner/repo', GITHUB_ACTION_REF: version,
    GITHUB_ACTION_PATH: actionDir, RUNNER_TOOL_CACHE: path.join(root, 'toolcache'), RUNNER_TEMP: path.join(root, 'temp'),
    GITHUB_STATE: path.join(root, 'state.txt'), FAKE_OUT: path.join(root, 'fake.json'),
    INPUT_RUNBOOK: 'demo', INPUT_DIR: 'runbooks', 'INPUT_CONTROL-PLANE': 'off', 'INPUT_CONTROL-PLANE-TOKEN': '', 'INPUT_STEP-INDEX': '',
    'INPUT_BUILD-FROM-SOURCE': 'false',
  };
  fs.mkdirSync(env.RUNNER_TEMP);
  return { root, actionDir, env, work, requests, name, tgt, archive };
}

// node runs an entry point of the action like the runner: resolves { code, out } at exit;
// onLine sees each output line (and may signal the process).
function node(job, entry, extraEnv = {}, onLine) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(job.actionDir, 'action', 'shim', entry)], {
      cwd: job.work, env: { ...job.env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const feed = (d) => {
      const before = out;
      out += d;
      if (onLine) for (const l of out.slice(before.lastIndexOf('\n') + 1).split('\n').slice(0, -1)) onLine(l, p);
    };
    p.stdout.on('data', feed);
    p.stderr.on('data', feed);
    p.on('close', (code, signal) => resolve({ code, signal, out }));
  });
}

const fakeRan = (job) => fs.existsSync(job.env.FAKE_OUT);
const fakeSaw = (job) => JSON.parse(fs.readFileSync(job.env.FAKE_OUT, 'utf8'));

test('ShimDownloadsFollowsRedirectVerifiesAndPassesExitCode', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  const r = await node(job, 'main.js', { FAKE_MODE: 'exit:3' });
  assert.equal(r.code, 3, r.out);
  assert.deepEqual(job.requests, [`/owner/repo/releases/download/${VERSION}/${job.name}`, `/assets/${job.name}?sig=x`]);
  assert.match(r.out, /downloaded and verified \(SHA-256 [0-9a-f]{64}\)/);
  assert.deepEqual(fakeSaw(job).argv, ['run', '--dir=runbooks', `--report=${path.join(job.env.RUNNER_TEMP, 'rbook', 'demo.report.md')}`, '--', 'demo']);
  const dir = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch);
  const marker = JSON.parse(fs.readFileSync(dir + '.complete', 'utf8'));
  assert.equal(marker.archive_sha256, lib.sha256(job.archive));
  assert.equal(marker.binary_sha256, lib.sha256(fs.readFileSync(path.join(dir, job.tgt.exe))));
  // GITHUB_STATE: name<<delimiter lines, the binary for post.js.
  const state = fs.readFileSync(job.env.GITHUB_STATE, 'utf8');
  const m = state.match(/^binary<<(ghadelimiter_[0-9a-f-]{36})\n(.*)\n\1\n/);
  assert.ok(m, state);
  assert.equal(m[2], path.join(dir, job.tgt.exe));
  for (const code of [0, 1, 2]) {
    const again = await node(job, 'main.js', { FAKE_MODE: `exit:${code}` });
    assert.equal(again.code, code, again.out);
  }
});

test('ShimCacheHitMakesNoRequest', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  assert.equal((await node(job, 'main.js')).code, 0);
  const n = job.requests.length;
  assert.equal(n, 2);
  const r = await node(job, 'main.js');
  assert.equal(r.code, 0, r.out);
  assert.equal(job.requests.length, n, `the cache hit made requests: ${job.requests.slice(n)}`);
  assert.match(r.out, /from the tool cache/);
  // A cached binary that no longer has its recorded checksum is not run: fetched again.
  const bin = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch, job.tgt.exe);
  fs.appendFileSync(bin, '\n// tampered\n');
  const r2 = await node(job, 'main.js');
  assert.equal(r2.code, 0, r2.out);
  assert.equal(job.requests.length, n + 2);
  assert.doesNotMatch(fs.readFileSync(bin, 'utf8'), /tampered/);
});

test('ShimRefusesBadChecksum', { skip: skipOnWindows }, async (t) => {
  const other = 'a'.repeat(64);
  const job = await setup(t, { sums: { [lib.archiveName(VERSION, lib.target())]: other } });
  const r = await node(job, 'main.js');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, new RegExp(`::error title=rbook action::${job.name}: SHA-256 [0-9a-f]{64} does not match the committed checksum ${other}`));
  assert.equal(fakeRan(job), false, 'the unverified binary ran');
  assert.equal(fs.existsSync(path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch + '.complete')), false);
  assert.doesNotMatch(r.out, /building rbook from source/i, 'a mismatch fell back to building');
});

test('ShimRefusesMissingChecksumEntry', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t, { sums: { 'rbook_v9.9.9_plan9_mips.tar.gz': 'b'.repeat(64) } });
  const r = await node(job, 'main.js');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, new RegExp(`release.json has no checksum for ${job.name.replace(/\./g, '\\.')}: refusing`));
  assert.deepEqual(job.requests, [], 'an unlisted archive was downloaded');
  assert.equal(fakeRan(job), false);
});

test('ShimForwardsSIGINTToRbook', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  let sent = false;
  const r = await node(job, 'main.js', { FAKE_MODE: 'wait' }, (line, p) => {
    if (line === 'FAKE READY' && !sent) {
      sent = true;
      p.kill('SIGINT');
    }
  });
  assert.ok(sent, r.out);
  assert.equal(fs.readFileSync(job.env.FAKE_OUT + '.sig', 'utf8'), 'SIGINT');
  assert.equal(r.code, 1, r.out); // rbook's own exit code for an interrupted run
  assert.equal(r.signal, null);
  const r2 = await node(job, 'main.js', { FAKE_MODE: 'wait' }, (line, p) => { if (line === 'FAKE READY') p.kill('SIGTERM'); });
  assert.equal(fs.readFileSync(job.env.FAKE_OUT + '.sig', 'utf8'), 'SIGTERM');
  assert.equal(r2.code, 1, r2.out);
});

test('ShimPassesShellMetacharactersVerbatim', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  const nasty = {
    INPUT_RUNBOOK: '-x; touch pwned1 $(touch pwned2) `touch pwned3` "q\' | cat',
    INPUT_DIR: 'dir with spaces && touch pwned4 > out',
    'INPUT_CONTROL-PLANE': 'http://127.0.0.1:1/$HOME;touch pwned5',
    'INPUT_CONTROL-PLANE-TOKEN': 'tok$(touch pwned6)`id`',
    'INPUT_STEP-INDEX': '2;touch pwned7',
  };
  const r = await node(job, 'main.js', nasty);
  assert.equal(r.code, 0, r.out);
  const saw = fakeSaw(job);
  // The report file's name keeps only [A-Za-z0-9._-] of the runbook input.
  const report = path.join(job.env.RUNNER_TEMP, 'rbook', '-x__touch_pwned1___touch_pwned2___touch_pwned3___q____cat.report.md');
  assert.deepEqual(saw.argv, ['run', `--dir=${nasty.INPUT_DIR}`, `--step-index=${nasty['INPUT_STEP-INDEX']}`, `--report=${report}`, '--', nasty.INPUT_RUNBOOK]);
  assert.equal(saw.cp, nasty['INPUT_CONTROL-PLANE']);
  assert.equal(saw.token, nasty['INPUT_CONTROL-PLANE-TOKEN']);
  assert.equal(saw.inputToken, null, 'the token input reached rbook under its INPUT_ name');
  assert.deepEqual(fs.readdirSync(job.work).filter((f) => f.startsWith('pwned')), []);
  assert.ok(!r.out.includes(nasty['INPUT_CONTROL-PLANE-TOKEN']), 'the token was printed');
});

test('ShimFallsBackToSourceOnlyWithoutARelease', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  const noGo = { PATH: path.join(job.root, 'empty-bin') }; // no go on PATH: the build says so
  fs.mkdirSync(noGo.PATH);
  const want = /building rbook from source needs Go on the runner, and 'go' is not on PATH/;
  // The ref has no release asset (404), uses: ./ (no ref), release.json names no version,
  // and build-from-source: true all build from source.
  for (const extra of [{ GITHUB_ACTION_REPOSITORY: 'owner/other' }, { GITHUB_ACTION_REF: '' }, { 'INPUT_BUILD-FROM-SOURCE': 'true' }]) {
    const r = await node(job, 'main.js', { ...noGo, ...extra });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, want, JSON.stringify(extra));
  }
  fs.writeFileSync(path.join(job.actionDir, 'action', 'shim', 'release.json'), '{"version": "", "archives": {}}');
  const r = await node(job, 'main.js', noGo);
  assert.match(r.out, /release.json names no release for this ref/);
  assert.match(r.out, want);
  assert.equal(fakeRan(job), false);
});

test('ShimPostRunsGithubPost', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  const none = await node(job, 'post.js');
  assert.equal(none.code, 0, none.out);
  assert.match(none.out, /installed no rbook binary/);
  assert.equal((await node(job, 'main.js')).code, 0);
  const bin = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch, job.tgt.exe);
  const r = await node(job, 'post.js', { STATE_binary: bin, STATE_cwd: job.work, FAKE_MODE: 'exit:2', INPUT_RUNBOOK: 'prod' });
  assert.equal(r.code, 2, r.out);
  assert.deepEqual(fakeSaw(job).argv, ['github', 'post', '--dir=runbooks', '--', 'prod']);
});

test('ShimTarReaderRefusesEscapesAndLinks', () => {
  const dest = fs.mkdtempSync(path.join(os.tmpdir(), 'rbook-untar-'));
  try {
    for (const name of ['../evil', '/abs/evil', 'a/../../evil', 'C:/evil', 'a\\..\\evil']) {
      assert.throws(() => lib.untarGz(tarGz({ [name]: 'x' }), dest), /refused \(absolute, or leaves the folder\)/, name);
    }
    assert.throws(() => lib.untarGz(tarGz({ link: '' }, { type: '2' }), dest), /type "2" refused \(regular files only\)/);
    assert.throws(() => lib.untarGz(zlib.gzipSync(Buffer.alloc(4096, 1)), dest, { maxBytes: 1024 }), /over 1024 bytes unpacked/);
    assert.deepEqual(lib.untarGz(tarGz({ 'rbook': 'bin', 'docs/a.md': 'a' }), dest), ['rbook', 'docs/a.md']);
    assert.equal(fs.readFileSync(path.join(dest, 'docs', 'a.md'), 'utf8'), 'a');
    assert.deepEqual(fs.readdirSync(path.dirname(dest)).filter((f) => f === 'evil'), []);
  } finally {
    fs.rmSync(dest, { recursive: true, force: true });
  }
});

test('ShimDownloadLimits', async (t) => {
  let hops = 0;
  const server = http.createServer((req, res) => {
    if (req.url === '/big') { res.writeHead(200); return res.end(Buffer.alloc(4096)); } // chunked: counted as it arrives
    if (req.url === '/declared') { res.writeHead(200, { 'Content-Length': 4096 }); return res.end(Buffer.alloc(4096)); }
    if (req.url === '/loop') { hops++; res.writeHead(302, { Location: '/loop' }); return res.end(); }
    if (req.url === '/hang') return; // never answers
    res.writeHead(404); res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const base = `http://127.0.0.1:${server.address().port}`;
  await assert.rejects(lib.download(base + '/big', { maxBytes: 1000 }), /\/big: over the limit of 1000 bytes/);
  await assert.rejects(lib.download(base + '/declared', { maxBytes: 1000 }), /\/declared: 4096 bytes, over the limit of 1000/);
  assert.equal((await lib.download(base + '/declared', { maxBytes: 4096 })).length, 4096);
  await assert.rejects(lib.download(base + '/loop'), /more than 5 redirects/);
  assert.equal(hops, lib.MAX_REDIRECTS + 1);
  await assert.rejects(lib.download(base + '/hang', { timeoutMs: 200 }), /no complete answer within 200 ms/);
  await assert.rejects(lib.download(base + '/nothing'), (e) => e.fallback === true && /HTTP 404/.test(e.message));
  server.closeAllConnections();
});

test('ShimTargets', () => {
  assert.deepEqual(lib.target({ RUNNER_OS: 'Windows', RUNNER_ARCH: 'ARM64' }), { os: 'windows', arch: 'arm64', exe: 'rbook.exe' });
  assert.deepEqual(lib.target({ RUNNER_OS: 'macOS', RUNNER_ARCH: 'X64' }), { os: 'darwin', arch: 'amd64', exe: 'rbook' });
  assert.deepEqual(lib.target({}, 'linux', 'arm64'), { os: 'linux', arch: 'arm64', exe: 'rbook' });
  assert.throws(() => lib.target({}, 'aix', 'ppc64'), /no release for this runner \(aix\/ppc64\)/);
  assert.equal(lib.archiveName('v0.7.0', { os: 'linux', arch: 'amd64' }), 'rbook_v0.7.0_linux_amd64.tar.gz');
});

// Poisoned caches, odd archives and versions, racing jobs and signal deaths.

test('ShimPoisonedCacheWithRewrittenMarkerIsNotRun', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  assert.equal((await node(job, 'main.js')).code, 0);
  const n = job.requests.length;
  // Another job on this self-hosted runner swaps the cached binary and rewrites the marker
  // with the new binary's checksum: the marker is in the cache too, so it proves nothing.
  const dir = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch);
  const bin = path.join(dir, job.tgt.exe);
  const evil = `#!/bin/sh\necho POISONED > "$FAKE_OUT.poisoned"\n`;
  fs.writeFileSync(bin, evil, { mode: 0o755 });
  const marker = JSON.parse(fs.readFileSync(dir + '.complete', 'utf8'));
  marker.binary_sha256 = lib.sha256(Buffer.from(evil));
  fs.writeFileSync(dir + '.complete', JSON.stringify(marker));
  const r = await node(job, 'main.js');
  assert.equal(r.code, 0, r.out);
  assert.equal(fs.existsSync(job.env.FAKE_OUT + '.poisoned'), false, 'the poisoned cached binary ran');
  assert.equal(job.requests.length, n + 2, 'the poisoned cache was not fetched again');
  assert.equal(lib.sha256(fs.readFileSync(bin)), lib.sha256(Buffer.from(fakeRbook())));
  // A clean cache hit still makes no request.
  assert.equal((await node(job, 'main.js')).code, 0);
  assert.equal(job.requests.length, n + 2);
});

test('ShimCacheHitChecksTheCommittedBinarySum', { skip: skipOnWindows }, async (t) => {
  const binSum = lib.sha256(Buffer.from(fakeRbook()));
  const job = await setup(t, { binaries: (name) => ({ [name]: binSum }) });
  assert.equal((await node(job, 'main.js')).code, 0);
  const n = job.requests.length;
  const dir = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch);
  const bin = path.join(dir, job.tgt.exe);
  // A cache hit checks the binary against the committed sum alone: the cached archive is not
  // read (removing it changes nothing) and no request is made.
  fs.rmSync(path.join(dir, lib.CACHED_ARCHIVE));
  assert.equal((await node(job, 'main.js')).code, 0);
  assert.equal(job.requests.length, n, 'a cache hit made a request');
  // A swapped binary does not match the committed sum: fetched again, never run.
  fs.writeFileSync(bin, `#!/bin/sh\necho POISONED > "$FAKE_OUT.poisoned"\n`, { mode: 0o755 });
  assert.equal((await node(job, 'main.js')).code, 0);
  assert.equal(fs.existsSync(job.env.FAKE_OUT + '.poisoned'), false, 'the swapped cached binary ran');
  assert.equal(job.requests.length, n + 2);
  assert.equal(lib.sha256(fs.readFileSync(bin)), binSum);
});

test('ShimRefusesAnArchiveWhoseBinaryIsNotTheCommittedOne', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t, { binaries: (name) => ({ [name]: 'f'.repeat(64) }) });
  const r = await node(job, 'main.js');
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /not the f{64} committed in release\.json; refusing it/);
  assert.equal(fakeRan(job), false, 'rbook ran');
});

test('ShimConcurrentJobsShareAColdToolCache', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  const runs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => node(job, 'main.js', { FAKE_OUT: `${job.env.FAKE_OUT}.${i}` })));
  runs.forEach((r, i) => {
    assert.equal(r.code, 0, `job ${i}: ${r.out}`);
    assert.ok(fs.existsSync(`${job.env.FAKE_OUT}.${i}`), `job ${i} did not run rbook: ${r.out}`);
  });
  const dir = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch);
  assert.deepEqual(fs.readdirSync(path.dirname(dir)).filter((f) => f.includes('.tmp-')), [], 'temp folders left behind');
  assert.match((await node(job, 'main.js')).out, /from the tool cache/);
});

test('ShimRefusesAVersionThatIsAPath', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rbook-rel-'));
  try {
    const f = path.join(dir, 'release.json');
    for (const version of ['v1.0.0/../../../../home', '../../x', 'v1\\..\\x', 'v1.0.0\n', '1.0.0']) {
      fs.writeFileSync(f, JSON.stringify({ version, archives: {} }));
      assert.throws(() => lib.readRelease(f), /version .* is not a release tag like v1\.2\.3/, JSON.stringify(version));
    }
    fs.writeFileSync(f, JSON.stringify({ version: 'v1.2.3-rc.1', archives: {} }));
    assert.equal(lib.readRelease(f).version, 'v1.2.3-rc.1');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('ShimTarReaderRefusesWindowsStreamsAndOddEntries', () => {
  const dest = fs.mkdtempSync(path.join(os.tmpdir(), 'rbook-untar-'));
  try {
    // An NTFS alternate data stream or a device name would write somewhere else on Windows.
    for (const name of ['rbook.exe:evil', 'a/b:c']) {
      assert.throws(() => lib.untarGz(tarGz({ [name]: 'x' }), dest), /refused/, name);
    }
    assert.throws(() => lib.untarGz(tarGz({ hard: '' }, { type: '1' }), dest), /type "1" refused/);
    assert.throws(() => lib.untarGz(tarGz({ longname: 'x' }, { type: 'L' }), dest), /type "L" refused/);
    const gz = tarGz({ rbook: 'x'.repeat(5000) });
    assert.throws(() => lib.untarGz(gz.subarray(0, gz.length - 30), dest), /cannot gunzip \(unexpected end of file\)/);
  } finally {
    fs.rmSync(dest, { recursive: true, force: true });
  }
});

test('ShimExitCodesAbove128AndSignalDeaths', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t);
  for (const code of [129, 200, 255]) {
    assert.equal((await node(job, 'main.js', { FAKE_MODE: `exit:${code}` })).code, code);
  }
  assert.equal(lib.exitCodeOf(null, 'SIGKILL'), 137);
  assert.equal(lib.exitCodeOf(null, 'SIGTERM'), 143);
  assert.equal(lib.exitCodeOf(null, null), 1);
});

test('ShimArchiveWithoutRbookIsRefusedAndNotCached', { skip: skipOnWindows }, async (t) => {
  const job = await setup(t, { archive: tarGz({ 'README.md': 'no binary here\n', 'bin/rbook': 'nested' }) });
  const r = await node(job, 'main.js');
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /archive: no rbook at its top level \(it holds README\.md, bin\/rbook\)/);
  const dir = path.join(job.env.RUNNER_TOOL_CACHE, 'rbook', '9.9.9', job.tgt.arch);
  assert.equal(fs.existsSync(dir + '.complete'), false);
  assert.deepEqual(fs.readdirSync(path.dirname(dir)), []);
});

test('ShimVerbResumeGateModeAndEnvironment', () => {
  const env = { INPUT_VERB: 'resume', INPUT_RUNBOOK: 'demo', 'INPUT_RUN-ID': 'RBOOK-20261201-demo-150d2498', 'INPUT_STEP-INDEX': '3',
    INPUT_REPORT: '/tmp/r.md', 'INPUT_GATE-MODE': 'pause', INPUT_ENVIRONMENT: 'production' };
  assert.deepEqual(lib.rbookVerb(env), ['resume']);
  // resume takes --run-id and never --step-index
  assert.deepEqual(lib.rbookArgs(['resume'], env), ['resume', '--dir=runbooks', '--run-id=RBOOK-20261201-demo-150d2498', '--report=/tmp/r.md', '--', 'demo']);
  assert.deepEqual(lib.rbookArgs(['run'], env), ['run', '--dir=runbooks', '--step-index=3', '--report=/tmp/r.md', '--', 'demo']);
  const out = lib.rbookEnv(env);
  assert.equal(out.RBOOK_GATE_MODE, 'pause');
  assert.equal(out.RBOOK_GITHUB_ENVIRONMENT, 'production');
  assert.deepEqual(lib.rbookVerb({}), ['run']);
  assert.equal(lib.rbookEnv({}).RBOOK_GATE_MODE, 'wait');
  assert.equal(lib.rbookEnv({}).RBOOK_GITHUB_ENVIRONMENT, undefined);
  assert.throws(() => lib.rbookVerb({ INPUT_VERB: 'rollback' }), /input verb: "rollback" is not run or resume/);
});

test('ShimPlaybookInputRunsRbookPlaybookRun', () => {
  const env = { INPUT_PLAYBOOK: 'runbooks/release.cantbook', INPUT_INPUTS: 'version=2026.4.90\n\n# a comment\n  note=a b=c $(x);  \n', INPUT_REPORT: '/tmp/r.md' };
  assert.deepEqual(lib.rbookVerb(env), ['playbook', 'run']);
  // each input one argument, never through a shell; "=" inside a value stays
  assert.deepEqual(lib.rbookArgs(['playbook', 'run'], env),
    ['playbook', 'run', '--input=version=2026.4.90', '--input=note=a b=c $(x);', '--report=/tmp/r.md', '--', 'runbooks/release.cantbook']);
  // the default report is named after the playbook's base name
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rbook-shim-'));
  assert.equal(lib.reportPath({ INPUT_PLAYBOOK: 'runbooks/release.cantbook', RUNNER_TEMP: tmp }), path.join(tmp, 'rbook', 'release.report.md'));
  assert.throws(() => lib.rbookVerb({ ...env, INPUT_RUNBOOK: 'demo' }), /inputs runbook and playbook are mutually exclusive/);
  assert.throws(() => lib.rbookVerb({ ...env, INPUT_VERB: 'resume' }), /is for runbooks; a playbook runs \(and resumes\) with verb run/);
  assert.throws(() => lib.rbookVerb({ INPUT_INPUTS: 'version=1' }), /input inputs is for a playbook/);
  assert.throws(() => lib.rbookArgs(['playbook', 'run'], { ...env, INPUT_INPUTS: 'version=1\n=oops' }), /input inputs, line 2: "=oops" is not NAME=VALUE/);
  // a runbook run is unchanged: an empty runbook input still means prod
  assert.deepEqual(lib.rbookArgs(['run'], { INPUT_REPORT: '/tmp/r.md' }), ['run', '--dir=runbooks', '--report=/tmp/r.md', '--', 'prod']);
});

test('ShimPlanInputRunsRbookPlanIntoTheSummaryFirst', () => {
  // plan: true runs `rbook plan --summary` on the same runbook or playbook before the run
  assert.equal(lib.planArgs(['run'], {}), null);
  assert.equal(lib.planArgs(['run'], { INPUT_PLAN: 'false', INPUT_RUNBOOK: 'demo' }), null);
  assert.deepEqual(lib.planArgs(['run'], { INPUT_PLAN: 'true', INPUT_RUNBOOK: 'demo', INPUT_DIR: 'ops' }),
    ['plan', '--summary', '--dir=ops', '--', 'demo']);
  assert.deepEqual(lib.planArgs(['run'], { INPUT_PLAN: 'TRUE' }), ['plan', '--summary', '--dir=runbooks', '--', 'prod']);
  assert.deepEqual(lib.planArgs(['playbook', 'run'], { INPUT_PLAN: 'true', INPUT_PLAYBOOK: 'runbooks/release.cantbook', INPUT_INPUTS: 'version=1.2.3\n' }),
    ['plan', '--summary', '--input=version=1.2.3', '--', 'runbooks/release.cantbook']);
  // a resumed run's plan is in the summary of the job that started it
  assert.equal(lib.planArgs(['resume'], { INPUT_PLAN: 'true', INPUT_RUNBOOK: 'demo' }), null);
  assert.throws(() => lib.planArgs(['run'], { INPUT_PLAN: 'yes' }), /input plan: "yes" is not true or false/);
});
