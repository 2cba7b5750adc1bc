/**
 * Klym's server: the task tools over MCP (Streamable HTTP, legacy SSE, stdio), a REST API and health,
 * built from typed options.
 * @module
 */
export { createKlymApp, type KlymApp } from './app.ts';
export { type GuardVariables } from './guards.ts';
export { SERVER_INFO, connectKlymMcpServer, createKlymMcpServer } from './mcp-server.ts';
export { openTaskStore, openTasks, type OpenedTasks } from './open-tasks.ts';
export { handleProcessFaults, type ProcessFaultOptions } from './process-faults.ts';
export { SERVER_DEFAULTS, isLoopback, resolveServerOptions, type KlymServerOptions, type ResolvedServerOptions, type ServerLog } from './server-options.ts';
export { handleShutdownSignals, startKlymServer, type RunningKlymServer, type ShutdownSignalOptions } from './start-server.ts';
export { serveStdio, type StdioKlym } from './stdio.ts';
export { startKlymWorker, type RunningKlymWorker } from './start-worker.ts';
