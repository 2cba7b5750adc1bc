/**
 * Klym's server: the task tools over MCP (Streamable HTTP, legacy SSE, stdio), a REST API and health,
 * built from typed options.
 * @module
 */
export { createKlymApp, type KlymApp } from './app.ts';
export { type GuardVariables } from './guards.ts';
export { createKlymService, type KlymService } from './klym-service.ts';
export { SERVER_INFO, createKlymMcpServer } from './mcp-server.ts';
export { isLoopback, resolveServerOptions, type KlymServerOptions, type ResolvedServerOptions } from './server-options.ts';
export { handleShutdownSignals, startKlymServer, type RunningKlymServer, type ShutdownSignalOptions } from './start-server.ts';
export { serveStdio, type StdioKlym } from './stdio.ts';
