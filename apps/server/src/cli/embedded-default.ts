import { KlymError, isKlymError } from '@klym/core';
import { MAX_EVENTS, createFakeGrynya, type FakeGrynya } from '@klym/fake-grynya';
import { taskStoreIn } from '../config/core-options.ts';
import { CLI_TASK_RUNNER, CLI_TASK_STORE } from '../config/schema.ts';
import { handleProcessFaults, handleShutdownSignals, startKlymServer, type KlymServerOptions, type RunningKlymServer } from '../server/index.ts';
import type { CliIo } from './cli.ts';

/** The ports the embedded default prefers: Klym's default, and grynya-mcp-server's own. Busy ones fall back to free ports. */
const KLYM_PORT = 8765;
const GRYNYA_PORT = 8000;
/** Event rows the fake's graph holds unless `KLYM_DEMO_EVENTS` says otherwise: a 3.6 MB one-line answer to `MATCH (e:Event) RETURN e`. */
const DEMO_EVENTS = 20_000;

/**
 * `pnpm start` with no arguments: the main job on an embedded default that needs no key and no outside
 * server. It starts the fake grynya-mcp-server on a loopback port (answering 421 to any Host but
 * `localhost`, like the real one inside Docker), then `klym serve` on 127.0.0.1 with it as the one
 * upstream over legacy SSE (the path the real deployment uses, `Host: localhost` included) and the
 * offline `scripted` model, keeping tasks in `.klym/tasks.db` under the working directory and running them
 * on a thread of their own, as `klym serve` does. The graph holds `KLYM_DEMO_EVENTS` (20,000) Event rows, which
 * `MATCH (e:Event) RETURN e` answers on one line as the real server answers a big query: a task's heavy data.
 * It prints the MCP URL and the command that plays Grynya, then serves until SIGINT/SIGTERM.
 * @throws {KlymError} `CONFIG_INVALID` for a `KLYM_DEMO_EVENTS` that is not a whole number from 0 to 1,000,000
 */
export async function runEmbeddedDefault(io: CliIo): Promise<void> {
  const events = demoEvents(io.env.KLYM_DEMO_EVENTS);
  const grynya = await withPortFallback(
    (port) => createFakeGrynya({ port, allowedHosts: ['localhost'], ...(events === 0 ? {} : { bigGraph: { events } }) }),
    GRYNYA_PORT,
  );
  const options: KlymServerOptions = {
    upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse', headers: { Host: 'localhost' } } },
    tasks: { models: ['scripted'], writeBack: { upstream: 'grynya' }, store: taskStoreIn(CLI_TASK_STORE, io.cwd), runner: CLI_TASK_RUNNER },
    log: (line) => void io.stderr.write(`${line}\n`),
  };
  let server: RunningKlymServer;
  try {
    server = await withPortFallback((port) => startKlymServer({ ...options, port }), KLYM_PORT);
  } catch (error) {
    await grynya.close();
    throw error;
  }
  const demo = server.port === KLYM_PORT && grynya.port === GRYNYA_PORT ? 'pnpm demo' : `pnpm demo --url ${server.mcpUrl} --grynya ${grynya.sseUrl}`;
  io.stdout.write(
    [
      `fake grynya-mcp-server: ${grynya.sseUrl} (in-memory graph; allows Host: localhost only, like the real one in Docker)`,
      ...(events === 0
        ? []
        : [`  its graph holds ${events.toLocaleString('en-US')} Event rows: MATCH (e:Event) RETURN e answers them on one line (KLYM_DEMO_EVENTS to change)`]),
      `Klym is serving MCP at ${server.mcpUrl} (Streamable HTTP) and ${server.sseUrl} (legacy SSE)`,
      `  upstream: grynya over legacy SSE · model: scripted (offline, no key) · REST: ${server.url}/api/tasks · health: ${server.url}/healthz`,
      '',
      `Play Grynya from another terminal:  ${demo}`,
      'Stop with Ctrl-C.',
      '',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> =>
      (closing ??= (async () => {
        await server.close();
        await grynya.close();
        resolve();
      })());
    handleShutdownSignals({ close }, { exit: (code) => void (process.exitCode ??= code) });
    // An unhandled rejection is logged and serving goes on; an uncaught exception shuts down as a signal does, exit 2.
    handleProcessFaults({
      log: options.log ?? (() => {}),
      shutdown: () => {
        process.exitCode = 2;
        void close();
      },
    });
  });
}

/** The Event rows `KLYM_DEMO_EVENTS` asks for. */
function demoEvents(value: string | undefined): number {
  if (value === undefined || value === '') return DEMO_EVENTS;
  const events = Number(value);
  if (!/^\d+$/.test(value) || events > MAX_EVENTS)
    throw new KlymError('CONFIG_INVALID', `Expected KLYM_DEMO_EVENTS to be a whole number from 0 to ${MAX_EVENTS}, got ${JSON.stringify(value)}`);
  return events;
}

/** Listens on `preferred`, or on a free port when that one is taken. */
async function withPortFallback<T extends FakeGrynya | RunningKlymServer>(listen: (port: number) => Promise<T>, preferred: number): Promise<T> {
  try {
    return await listen(preferred);
  } catch (error) {
    const inUse = (isKlymError(error) ? error.cause : error) as { code?: string } | undefined;
    if (inUse?.code !== 'EADDRINUSE') throw error;
    return listen(0);
  }
}
