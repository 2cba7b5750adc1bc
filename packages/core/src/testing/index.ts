/**
 * Test doubles for code built on `@klym/core`.
 * @module
 */
export { createInMemoryUpstream, type ConnectableServer } from './in-memory-upstream.ts';
