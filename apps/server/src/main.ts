#!/usr/bin/env -S node --conditions=klym-source
// The `klym` command (`pnpm klym …`, the package's bin): `klym serve`, `klym run`, `klym config`, `--help`;
// see cli/cli.ts. Without arguments (`pnpm start`) it runs the embedded default, which needs no key and
// no outside server: `klym serve` with the fake grynya-mcp-server as its upstream (cli/embedded-default.ts).
import module from 'node:module';

// V8's code cache on disk (in the OS temp folder): a second start skips compiling Klym and its
// dependencies again, about 0.5 s of a 1.5 s cold start here. Enabled before anything else loads.
module.enableCompileCache?.();
// The AI SDK prints provider warnings (an unsupported JSON Schema keyword, a setting a model ignores) with
// console.warn; stdout and stderr belong to the CLI's own output here.
(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false;
const { exitCodeOf, reportError, runCli } = await import('./cli/cli.ts');

const argv = process.argv.slice(2);
if (argv.length === 0) {
  const { runEmbeddedDefault } = await import('./cli/embedded-default.ts');
  const io = { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() };
  // A start-up failure (a busy task store, say) is one line, as for `klym serve`, not a stack trace.
  await runEmbeddedDefault(io).catch((error: unknown) => {
    reportError(io, error);
    process.exitCode = exitCodeOf(error);
  });
} else {
  // The first SIGINT/SIGTERM asks the command to stop (a run is cancelled, a server shuts down gracefully);
  // a second one exits at once.
  const interrupt = new AbortController();
  const onSignal = (): void => {
    if (interrupt.signal.aborted) process.exit(130);
    interrupt.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.exitCode = await runCli(argv, {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    signal: interrupt.signal,
  });
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}
