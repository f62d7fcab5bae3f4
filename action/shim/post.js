'use strict';
// The rbook Action's post step (action.yml: post, post-if: always()). It runs
// `rbook github post` with the same inputs as main: a run the job left unfinished is recorded
// interrupted, its outbox delivered and its pending approvals withdrawn (docs/action.md, "How the Action runs rbook").
// When main never got a binary (it failed before), there is nothing to do.
const { ShimError, input, rbookEnv, rbookArgs, runForwarding } = require('./lib.js');

async function post() {
  const bin = process.env.STATE_binary;
  if (!bin) {
    console.log('rbook: the main step installed no rbook binary, so it started no run; nothing to finish.');
    return 0;
  }
  if (process.env.STATE_cwd) process.chdir(process.env.STATE_cwd);
  const playbook = input('playbook', '', process.env);
  if (playbook !== '') {
    // docs/playbooks.md: the playbook's run is finished the same way (outbox delivered; an unfinished
    // run recorded interrupted and its pending approval nodes withdrawn).
    return runForwarding(bin, ['github', 'post', `--playbook=${playbook}`], rbookEnv());
  }
  return runForwarding(bin, rbookArgs(['github', 'post']), rbookEnv());
}

post().then((code) => {
  process.exitCode = code;
}, (e) => {
  const msg = e instanceof ShimError ? e.message : (e && e.stack) || String(e);
  console.log(`::error title=rbook action post::${msg.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}`);
  process.exitCode = 1;
});
