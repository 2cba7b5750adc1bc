import type { McpServer, Transport } from '@modelcontextprotocol/server';

/** One client session over either transport. */
export interface McpSession {
  readonly id: string;
  readonly kind: 'streamable-http' | 'sse';
  readonly transport: Transport;
  readonly server: McpServer;
  /** Who opened it; requests of another principal are refused on it. */
  readonly principal: string;
  lastSeen: number;
}

/**
 * The open MCP sessions of both transports, by session id. A session with no request for `idleMs` is
 * closed by a sweep; closing a session closes its transport and its server.
 */
export class McpSessions {
  readonly #sessions = new Map<string, McpSession>();
  readonly #idleMs: number;
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(idleMs: number) {
    this.#idleMs = idleMs;
    this.#sweeper = setInterval(() => this.#sweep(), Math.max(10, Math.min(idleMs / 2, 60_000)));
    this.#sweeper.unref();
  }

  get size(): number {
    return this.#sessions.size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Adds a session, after its server is connected; it leaves the registry when its transport closes. */
  add(session: Omit<McpSession, 'lastSeen'>): void {
    const entry: McpSession = { ...session, lastSeen: Date.now() };
    this.#sessions.set(session.id, entry);
    const previous = session.transport.onclose;
    session.transport.onclose = () => {
      previous?.();
      if (this.#sessions.get(session.id) === entry) this.#sessions.delete(session.id);
    };
  }

  /** The session of `id` and `kind` if it exists and belongs to `principal`; marks it used. */
  use(id: string, kind: McpSession['kind'], principal: string): McpSession | undefined {
    const session = this.#sessions.get(id);
    if (session === undefined || session.kind !== kind || session.principal !== principal) return undefined;
    session.lastSeen = Date.now();
    return session;
  }

  /** Refuses new sessions from now on (shutdown has begun); open ones go on. */
  stopAccepting(): void {
    this.#closed = true;
  }

  /** Closes every session and stops the sweep. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    await Promise.allSettled([...this.#sessions.values()].map((session) => this.#end(session)));
    this.#sessions.clear();
  }

  #sweep(): void {
    const cutoff = Date.now() - this.#idleMs;
    for (const session of this.#sessions.values()) if (session.lastSeen < cutoff) void this.#end(session);
  }

  async #end(session: McpSession): Promise<void> {
    this.#sessions.delete(session.id);
    // Closing the server closes its transport, which ends the HTTP stream or SSE response.
    await session.server.close().catch(() => {});
  }
}
