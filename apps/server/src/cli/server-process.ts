import type { Tracer } from '@opentelemetry/api';
import { configSecrets, serverOptions } from '../config/core-options.ts';
import type { KlymConfig } from '../config/schema.ts';
import { handleProcessFaults, type KlymServerOptions } from '../server/index.ts';
import { openTracing } from '../telemetry/tracing-env.ts';
import { configFor, EXIT, type CliIo } from './cli.ts';
import { aborted, logSink } from './log-sink.ts';
import type { CommandLine } from './parse-command.ts';

/** What `klym serve` and `klym worker` run inside: the configuration, the log, tracing, fault handling. */
export interface ServerProcess {
  readonly config: KlymConfig;
  /** The config file read, if any. */
  readonly file: string | undefined;
  /** The server's options from the configuration, with the log and tracing wired in. */
  readonly options: KlymServerOptions & { readonly log: NonNullable<KlymServerOptions['log']> };
  /** Resolves on SIGINT/SIGTERM (`io.signal`) or after an uncaught exception. */
  readonly stopped: Promise<void>;
  /** 0, or 2 when an uncaught exception stopped the process. */
  status(): number;
  /** Stops fault handling, then exports what tracing holds and closes the log: after the server closed. */
  close(): Promise<void>;
}

/**
 * Sets up a server process from its command line: the layered configuration, the log sink, tracing (off
 * unless the standard `OTEL_*` environment asks for it; a variable Klym cannot honour stops start-up,
 * named), and fault handling — an unhandled rejection is logged and serving goes on, an uncaught
 * exception is logged and stops the process gracefully (see `handleProcessFaults`).
 */
export async function openServerProcess(parsed: CommandLine, io: CliIo): Promise<ServerProcess> {
  const { config, file } = configFor(parsed, io);
  const sink = logSink(config, io);
  const tracing = await openTracing(io.env).catch(async (error: unknown) => {
    await sink.close();
    throw error;
  });
  if (tracing !== undefined) sink.log(`klym: tracing on: spans go to ${tracing.destination}`);
  const fault = new AbortController();
  const stopHandling = handleProcessFaults({ log: sink.log, secrets: configSecrets(config), shutdown: () => fault.abort() });
  return {
    config,
    file,
    options: withTracing({ ...serverOptions(config, io.cwd), log: sink.log }, tracing?.tracer),
    stopped: Promise.race([aborted(io.signal), aborted(fault.signal)]),
    status: () => (fault.signal.aborted ? EXIT.failure : EXIT.ok),
    async close() {
      stopHandling();
      // After the server closed: the spans of the tasks it ended are exported too.
      await tracing?.close();
      await sink.close();
    },
  };
}

/** `options` whose tasks are traced with `tracer`, when tracing is on. */
function withTracing<Options extends KlymServerOptions>(options: Options, tracer: Tracer | undefined): Options {
  return tracer === undefined ? options : { ...options, tasks: { ...options.tasks, tracing: { tracer } } };
}
