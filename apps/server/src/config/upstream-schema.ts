import { MAX_TIMER_MS } from '@klym/core/server';
import { z } from 'zod';

const UPSTREAM_NAME = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/;

/** An upstream's name: it prefixes tool names (`grynya__query_graph`), so letters and digits joined by single `-` or `_`. */
export const upstreamNameSchema = z
  .string()
  .max(32, 'expected an upstream name of at most 32 characters')
  .regex(UPSTREAM_NAME, 'expected an upstream name of letters and digits joined by single "-" or "_"');

/** A time limit in milliseconds: Node's timers fire at once past core's `MAX_TIMER_MS` (about 24.8 days), so longer ones are refused. */
export const milliseconds = z
  .number()
  .int()
  .nonnegative()
  .max(MAX_TIMER_MS, `expected at most ${MAX_TIMER_MS} ms (about 24.8 days; Node timers fire at once past that)`);
const positiveMs = milliseconds.positive();

const clientId = z.string().min(1);
/** Space-separated scopes to ask for. @default what the upstream's protected resource metadata offers */
const scope = z.string().min(1).optional();
/**
 * The authorization server's issuer the client is registered with: no other is sent its credentials.
 * Required (as in the library): without it the upstream would decide which server receives Klym's
 * credentials. https, except on loopback (127.0.0.0/8, ::1, localhost).
 */
const issuer = z
  .url({ protocol: /^https?$/, error: 'expected the https URL of the authorization server the client is registered with' })
  .refine((url) => url.startsWith('https:') || /^http:\/\/(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?(\/|$)/i.test(url), {
    error: 'expected an https URL (plain http only on loopback: 127.0.0.0/8, ::1, localhost)',
  });

/**
 * OAuth client credentials for an HTTP upstream (`client_credentials` grant): with a client secret, or a
 * JWT assertion signed with a private key (`private_key_jwt`, SEP-1046) given as PEM text or a file.
 * Secrets in `klym config` and in every log.
 */
export const upstreamAuthSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('client_credentials'), clientId, clientSecret: z.string().min(1), scope, issuer }),
  z
    .strictObject({
      type: z.literal('private_key_jwt'),
      clientId,
      /** The private key, PEM. */
      privateKey: z.string().min(1).optional(),
      /** A file holding the private key, PEM; relative to the working directory. */
      privateKeyFile: z.string().min(1).optional(),
      /** The JWS algorithm. @default from the key (RS256, ES256, ES384, ES512, EdDSA) */
      algorithm: z.string().min(1).optional(),
      scope,
      issuer,
    })
    .refine((value) => (value.privateKey === undefined) !== (value.privateKeyFile === undefined), {
      message: 'expected exactly one of `privateKey` or `privateKeyFile`',
    }),
]);

/** Fields shared by Klym's own upstream entries and the `mcpServers` entries of MCP desktop clients. */
const upstreamFields = {
  /** The server's URL, for HTTP transports: `http://grynya-mcp-server:8000/sse`. */
  url: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).optional(),
  /** `auto` tries Streamable HTTP, then legacy SSE on a 4xx. @default 'auto' for a url, 'stdio' for a command */
  transport: z.enum(['auto', 'streamable-http', 'sse', 'stdio']).optional(),
  /**
   * The protocol revision: `auto` probes with `server/discover` and speaks 2026-07-28 to an upstream that
   * offers it, else 2025-11-25; `2025-11-25` never probes; `2026-07-28` refuses an upstream without it.
   * Legacy SSE is always 2025-11-25. @default 'auto' for a url, '2025-11-25' for a command
   */
  protocol: z.enum(['auto', '2025-11-25', '2026-07-28']).optional(),
  /** Headers on every request to an HTTP upstream (bearer tokens, `Host`). Values are secrets in `klym config`. @default {} */
  headers: z.record(z.string(), z.string()).optional(),
  /** OAuth for an HTTP upstream: a token from the client-credentials grant, renewed before it expires. @default none */
  auth: upstreamAuthSchema.optional(),
  /** The command that starts a stdio server. */
  command: z.string().min(1).optional(),
  /** Arguments of `command`. @default [] */
  args: z.array(z.string()).optional(),
  /** Environment of the stdio child, on top of a minimal safe set; Klym's own environment is never passed on. @default {} */
  env: z.record(z.string(), z.string()).optional(),
  /** Working directory of the stdio child. @default the current directory */
  cwd: z.string().optional(),
  /**
   * Who shares a session: `shared`, any task's call on any pooled session (stateless tools); `task`, a
   * session of the task's own for its whole run, closed when it ends, counted against `pool.max` (an
   * upstream that keeps state per session: a browser, a shell, subscriptions). @default 'shared'
   */
  sessionScope: z.enum(['shared', 'task']).optional(),
  /**
   * The largest message the upstream may send, in bytes (a stdio frame, a JSON body, an SSE event); a larger
   * one fails the call it answers, and the session goes on. @default 134217728 (128 MiB)
   */
  maxMessageBytes: z.number().int().positive().optional(),
  /** Keep the entry but do not connect to it. @default false */
  disabled: z.boolean().optional(),
  /** Rules for this upstream's tools, by their own names (`query_*`). */
  tools: z
    .strictObject({
      /** Only tools matching one of these. @default every tool */
      allow: z.array(z.string().min(1)).optional(),
      /** Never tools matching one of these; wins over `allow`. @default [] */
      deny: z.array(z.string().min(1)).optional(),
      /** Tools that count as read-only though not annotated `readOnlyHint`. @default [] */
      readOnlyTools: z.array(z.string().min(1)).optional(),
      /** Tools whose every call in a task waits for the caller's approval (`reply_to_agent_task` with `approve`). @default [] */
      approval: z.array(z.string().min(1)).optional(),
      /** The `scripted` self-check's probe. @default `query_graph` with `RETURN 1` where there is one, else a read-only tool without arguments */
      probe: z.strictObject({ tool: z.string().min(1), args: z.record(z.string(), z.unknown()).optional() }).optional(),
    })
    .optional(),
  /** Time limits in milliseconds; the pool's defaults apply to what is left out (connect 10 s, request 60 s, …). */
  timeouts: z
    .strictObject({
      connectMs: positiveMs.optional(),
      requestMs: positiveMs.optional(),
      maxTotalMs: positiveMs.optional(),
      acquireMs: positiveMs.optional(),
      idlePingMs: milliseconds.optional(),
    })
    .optional(),
  /** Sessions kept per upstream. @default { min: 1, max: 4 } (max 1 for stdio) */
  pool: z
    .strictObject({
      min: z.number().int().nonnegative().optional(),
      max: z.number().int().positive().optional(),
      maxWaiting: z.number().int().nonnegative().optional(),
    })
    .optional(),
  /** The circuit breaker over connect attempts. @default { failureThreshold: 3, cooldownMs: 1000, maxCooldownMs: 10000 } */
  breaker: z
    .strictObject({
      failureThreshold: z.number().int().positive().optional(),
      cooldownMs: positiveMs.optional(),
      maxCooldownMs: positiveMs.optional(),
    })
    .optional(),
};

/** One upstream MCP server in Klym's own shape: a `url` (HTTP) or a `command` (stdio). */
export const upstreamSchema = z.strictObject(upstreamFields).superRefine((upstream, context) => {
  if ((upstream.url === undefined) === (upstream.command === undefined)) {
    context.addIssue({ code: 'custom', message: 'expected exactly one of `url` or `command`', input: upstream });
  } else if (upstream.url !== undefined && upstream.transport === 'stdio') {
    context.addIssue({ code: 'custom', path: ['transport'], message: '`transport: stdio` needs a `command`, not a `url`', input: upstream.transport });
  } else if (upstream.command !== undefined && upstream.transport !== undefined && upstream.transport !== 'stdio') {
    context.addIssue({
      code: 'custom',
      path: ['transport'],
      message: `\`transport: ${upstream.transport}\` needs a \`url\`, not a \`command\``,
      input: upstream.transport,
    });
  }
  if (upstream.command !== undefined && upstream.auth !== undefined) {
    context.addIssue({ code: 'custom', path: ['auth'], message: '`auth` needs a `url`: OAuth is for HTTP upstreams', input: upstream.auth.type });
  }
  if (upstream.pool?.min !== undefined && upstream.pool.max !== undefined && upstream.pool.min > upstream.pool.max) {
    context.addIssue({ code: 'custom', path: ['pool', 'min'], message: `expected at most \`pool.max\` (${upstream.pool.max})`, input: upstream.pool.min });
  }
});

/**
 * One entry of the `mcpServers` map that MCP desktop clients (Claude Desktop, Cursor, Cline, VS Code)
 * use, accepted as pasted: their `type` (`stdio`, `sse`, `http`), Cline's `timeout` in seconds, and the
 * approval lists some clients keep (`autoApprove`, `alwaysAllow`, ignored: Klym's policies decide).
 */
export const mcpServerSchema = z
  .strictObject({
    ...upstreamFields,
    type: z.enum(['stdio', 'sse', 'http', 'streamable-http', 'streamableHttp']).optional(),
    timeout: z.number().positive().optional(),
    autoApprove: z.array(z.string()).optional(),
    alwaysAllow: z.array(z.string()).optional(),
    description: z.string().optional(),
  })
  .superRefine((server, context) => {
    if ((server.url === undefined) === (server.command === undefined)) {
      context.addIssue({ code: 'custom', message: 'expected exactly one of `url` or `command`', input: server });
    }
  });

/** An upstream as the configuration holds it. */
export type UpstreamEntry = z.output<typeof upstreamSchema>;

/** Turns a desktop client's `mcpServers` entry into Klym's upstream shape. */
export function upstreamFromMcpServer(server: z.output<typeof mcpServerSchema>): UpstreamEntry {
  const { type, timeout, autoApprove: _autoApprove, alwaysAllow: _alwaysAllow, description: _description, ...upstream } = server;
  const transport = upstream.transport ?? (type === undefined ? undefined : type === 'stdio' ? 'stdio' : type === 'sse' ? 'sse' : 'streamable-http');
  const requestMs = upstream.timeouts?.requestMs ?? (timeout === undefined ? undefined : Math.round(timeout * 1_000));
  return {
    ...upstream,
    ...(transport === undefined ? {} : { transport }),
    ...(requestMs === undefined ? {} : { timeouts: { ...upstream.timeouts, requestMs } }),
  };
}
