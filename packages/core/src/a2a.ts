/**
 * `@klym/core/a2a`: Klym's tasks over Agent2Agent (A2A 1.0, JSON-RPC binding), on `@a2a-js/sdk`'s types and
 * transport handler, served from the task service itself — so another agent can serve them too.
 * @module
 */
export { createA2aEndpoint, type A2aEndpoint, type A2aEndpointOptions } from './a2a/a2a-endpoint.ts';
export type { A2aRequestHandlerOptions } from './a2a/a2a-request-handler.ts';
export type { AgentCardOptions, AgentCardSecurity } from './a2a/agent-card.ts';
export type { AuthorizationServerMetadata } from './a2a/oauth-flows.ts';
export { a2aPush } from './a2a/a2a-push.ts';
