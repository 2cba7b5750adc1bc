#!/usr/bin/env node
// Starts Klym over a fake grynya in this process, for tests that need a real process: `--stdio` serves
// MCP on stdin/stdout (nothing else goes to stdout); otherwise Klym listens on a loopback port and prints
// one JSON line `{"url","mcpUrl","sseUrl"}`. `--hang` makes every grynya call hang; `--grace <ms>` sets
// the shutdown grace period. On SIGINT/SIGTERM it shuts down gracefully and, before exiting, prints one
// stderr line `klym-test-exit {"tasks":[…],"grynyaCancelled":n}` so a test can see what shutdown did.
import { parseArgs } from 'node:util';
import type { TaskManager } from '@klym/core';
import { createFakeGrynya } from '@klym/fake-grynya';
import { handleShutdownSignals, serveStdio, startKlymServer, type KlymServerOptions } from '../../apps/server/src/server/index.ts';

const { values } = parseArgs({ options: { stdio: { type: 'boolean' }, hang: { type: 'boolean' }, grace: { type: 'string' } } });
const grynya = await createFakeGrynya();
grynya.faults.hang = values.hang ?? false;
const options: KlymServerOptions = {
  port: 0,
  upstreams: { grynya: { url: grynya.sseUrl, transport: 'sse' } },
  tasks: { shutdownGraceMs: Number(values.grace ?? 1_000) },
  log: (line) => process.stderr.write(`${line}\n`),
};

const report = async (tasks: TaskManager) => {
  const list = (await tasks.list({ principal: 'anonymous' })).tasks.map((task) => ({ id: task.id, status: task.status, cancelReason: task.cancelReason }));
  process.stderr.write(`klym-test-exit ${JSON.stringify({ tasks: list, grynyaCancelled: grynya.stats.cancelled })}\n`);
};

if (values.stdio) {
  const klym = await serveStdio(options);
  const close = async (): Promise<void> => {
    await klym.close();
    await report(klym.service.tasks);
    await grynya.close();
  };
  handleShutdownSignals({ close });
  await klym.closed;
  await close();
  process.exit(0);
} else {
  const server = await startKlymServer(options);
  handleShutdownSignals({
    async close() {
      await server.close();
      await report(server.klym.service.tasks);
      await grynya.close();
    },
  });
  process.stdout.write(`${JSON.stringify({ url: server.url, mcpUrl: server.mcpUrl, sseUrl: server.sseUrl })}\n`);
}
