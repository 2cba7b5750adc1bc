// Preloaded into a real `klym` process by tests (`node --import` this file): on SIGUSR2 it provokes the
// fault that `INJECT_FAULT` names — `rejection` (a promise rejects and nobody ever handles it) or
// `exception` (a throw from a timer callback, which nothing can catch) — with `INJECT_FAULT_SECRET` in its
// message, to prove the report is redacted. Klym has no known path that does either (each would be a bug
// to fix, not a way to test), and its production code carries no hook for it; Node's own `--import` does.
const kind = process.env.INJECT_FAULT ?? 'rejection';
const secret = process.env.INJECT_FAULT_SECRET ?? '';

process.on('SIGUSR2', () => {
  const fault = new Error(`injected ${kind}; the upstream answered with Authorization: Bearer ${secret}`);
  if (kind === 'exception') {
    setImmediate(() => {
      throw fault;
    });
  } else {
    void Promise.reject(fault);
  }
});
