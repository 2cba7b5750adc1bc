// A 2026-07-28 upstream in its own process for the benchmarks: the v2 SDK's createMcpHandler
// (test/support/modern-upstream.ts) on an ephemeral loopback port; prints its URL and serves until killed.
import { startModernUpstream } from '../test/support/modern-upstream.ts';

const upstream = await startModernUpstream();
console.log(`modern upstream at ${upstream.url}`);
