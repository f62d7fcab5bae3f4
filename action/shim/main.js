'use strict';
// The rbook Action's main step (action.yml: runs.using node24, main). It gets the rbook
// binary for this runner — from the tool cache, or the release archive named in release.json
// downloaded and checked against its committed SHA-256, or built from source — and runs
// `rbook run` (or, with verb: resume, `rbook resume`; with plan: true, `rbook plan` first) with the inputs as arguments and environment variables (never through a shell),
// forwarding SIGINT/SIGTERM to it and exiting with its exit code (docs/action.md, "How the Action runs rbook").
const { ShimError, resolveBinary, saveState, rbookEnv, rbookVerb, rbookArgs, planArgs, runForwarding } = require('./lib.js');

async function main() {
  const verb = rbookVerb(); // refused before anything is downloaded
  const plan = planArgs(verb);
  const started = Date.now();
  const { bin, how } = await resolveBinary();
  console.log(`rbook: ${how} in ${Date.now() - started} ms: ${bin}`);
  // What post.js needs: the binary, and the folder the run's state file is relative to.
  saveState('binary', bin);
  saveState('cwd', process.cwd());
  if (plan) {
    // With plan: true the plan goes to the job summary first; a plan that does not load
    // (exit 2) is what the run would refuse too, so the step ends there.
    const code = await runForwarding(bin, plan, rbookEnv());
    if (code !== 0) return code;
  }
  return runForwarding(bin, rbookArgs(verb), rbookEnv());
}

main().then((code) => {
  process.exitCode = code;
}, (e) => {
  // A workflow command: the message is the shim's own text (paths, URLs, checksums).
  const msg = e instanceof ShimError ? e.message : (e && e.stack) || String(e);
  console.log(`::error title=rbook action::${msg.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}`);
  process.exitCode = 1;
});
