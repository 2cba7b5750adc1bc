// A 2026-07-28 upstream in its own process for the benchmarks: the v2 SDK's createMcpHandler
// (test/support/mcp-2026-07-28-upstream.ts) on an ephemeral loopback port; prints its URL and serves until killed.
import { startMcp20260728Upstream } from '../test/support/mcp-2026-07-28-upstream.ts';

const upstream = await startMcp20260728Upstream();
console.log(`2026-07-28 upstream at ${upstream.url}`);
