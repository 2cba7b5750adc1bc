/**
 * Klym's server: the task tools over MCP (Streamable HTTP, legacy SSE, stdio), a REST API and health,
 * built from typed options.
 * @module
 */
export { createKlymApp, type KlymApp } from './app.ts';
export { type GuardVariables } from './guards.ts';
export { SERVER_INFO, connectKlymMcpServer, createKlymMcpServer } from './mcp-server.ts';
export { openTasks, type OpenedTasks, type TaskObservers } from './open-tasks.ts';
export { OAUTH_DEFAULTS, type KlymOperation, type OAuthResourceOptions } from './oauth-options.ts';
export { requestLog } from './request-log.ts';
export { handleProcessFaults, type ProcessFaultOptions } from './process-faults.ts';
export { SERVER_DEFAULTS, isLoopback, resolveServerOptions, type KlymServerOptions, type ResolvedServerOptions, type ServerLog } from './server-options.ts';
export { handleShutdownSignals, startKlymServer, type RunningKlymServer, type ShutdownSignalOptions } from './start-server.ts';
export { serveStdio, type StdioKlym } from './stdio.ts';
export { startKlymWorker, type RunningKlymWorker } from './start-worker.ts';
export { createKlymMetrics, type KlymMetrics, type KlymMetricsOptions } from '../metrics/klym-metrics.ts';
export { mountMetrics } from '../metrics/metrics-route.ts';
