/**
 * `@klym/core`: long-lived MCP client sessions to upstream servers, and what runs on them.
 * @module
 */
export { KlymError, isKlymError, type KlymErrorCode, type KlymErrorOptions } from './errors.ts';
export {
  createSessionPool,
  type CloseOptions,
  type PoolTool,
  type SessionPool,
  type SessionPoolOptions,
  type ToolListing,
} from './pool/session-pool.ts';
export type { CallToolOptions, UpstreamStatus } from './pool/upstream.ts';
export type { TransportKind, UpstreamConfig } from './pool/upstream-config.ts';
export type { UpstreamLogEntry } from './pool/upstream-session.ts';
export { MAX_TOOL_NAME_LENGTH, TOOL_NAME_SEPARATOR, namespaceToolName } from './pool/tool-name.ts';
