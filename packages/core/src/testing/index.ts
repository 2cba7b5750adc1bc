/**
 * Test doubles for code built on `@klym/core`.
 * @module
 */
export { createInMemoryUpstream, type ConnectableServer } from './in-memory-upstream.ts';
export { createMockModel, mockTurnParts, textUntilAborted, type MockStep, type MockTurn, type StreamResult } from './mock-model.ts';
export type { LanguageModelCallOptions, LanguageModelStreamPart, LanguageModelV4 } from '../agent/language-model.ts';
export { runResult } from './run-result.ts';
