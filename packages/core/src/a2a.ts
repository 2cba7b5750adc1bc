/**
 * `@klym/core/a2a`: Klym's tasks over Agent2Agent (A2A 1.0, JSON-RPC binding), on `@a2a-js/sdk`'s types and
 * transport handler, served from the task service itself — so another agent can serve them too.
 * @module
 */
export { createA2aEndpoint, type A2aEndpoint, type A2aEndpointOptions } from './a2a/a2a-endpoint.ts';
export { KLYM_METADATA_KEY, createA2aRequestHandler, toA2aError, type A2aRequestHandlerOptions } from './a2a/a2a-request-handler.ts';
export { A2A_STATE_OF, RESULT_ARTIFACT_ID, klymStatusOf, toA2aTask } from './a2a/a2a-task.ts';
export { DELEGATE_SKILL_ID, buildAgentCard, type AgentCardOptions, type AgentCardSecurity } from './a2a/agent-card.ts';
export { watchTask, type WatchTaskOptions } from './a2a/task-watch.ts';
export { MAX_TASKS_SCANNED, listA2aTasks } from './a2a/a2a-list-tasks.ts';
export { a2aPush, a2aPushFormat, pushTargetRequestOf, toPushConfig } from './a2a/a2a-push.ts';
export { issuerMetadataReader, oauthFlowsOf, type AuthorizationServerMetadata, type OperationScopes } from './a2a/oauth-flows.ts';
