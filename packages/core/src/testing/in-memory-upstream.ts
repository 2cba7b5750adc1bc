import { InMemoryTransport, type Transport } from '@modelcontextprotocol/server';
import type { UpstreamConfig } from '../pool/upstream-config.ts';

/** Anything that serves MCP over a transport: an `McpServer` or a low-level `Server`. */
export interface ConnectableServer {
  connect(transport: Transport): Promise<void>;
}

/**
 * An upstream served in-process: each pooled session gets a fresh server from `createServer`, joined to
 * it by the SDK's `InMemoryTransport`. For tests of code built on `@klym/core`, with no port or child.
 *
 * @example
 * ```ts
 * const pool = await createSessionPool({ upstreams: { demo: createInMemoryUpstream(() => buildMyServer()) } })
 * ```
 */
export function createInMemoryUpstream(
  createServer: () => ConnectableServer,
  options: Pick<UpstreamConfig, 'pool' | 'timeouts' | 'sessionScope'> = {},
): UpstreamConfig {
  return {
    ...options,
    async connect() {
      // Closing one side of a linked pair closes the other, so the server goes with the session.
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      await createServer().connect(serverSide);
      return clientSide;
    },
  };
}
