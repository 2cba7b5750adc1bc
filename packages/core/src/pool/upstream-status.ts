import type { Progress } from '@modelcontextprotocol/client';
import type { KlymErrorCode } from '../errors.ts';
import type { CircuitBreakerStatus } from './circuit-breaker.ts';
import type { TransportKind } from './upstream-config.ts';
import type { UpstreamLogEntry } from './upstream-session.ts';

/** Options of one call through the pool. */
export interface CallToolOptions {
  /** Aborts the call; the upstream is sent `notifications/cancelled` and the session is replaced. */
  readonly signal?: AbortSignal;
  /** Time limit of the call once it has a session; progress restarts it, up to the upstream's `timeouts.maxTotalMs`. @default the upstream's `timeouts.requestMs` */
  readonly timeoutMs?: number;
  /** Receives the upstream's progress notifications for this call. */
  readonly onProgress?: (progress: Progress) => void;
  /** Receives what the upstream logs (notifications, stderr) while it serves this call. */
  readonly onLog?: (entry: UpstreamLogEntry) => void;
  /**
   * Entries for the request's `params._meta`, sent as they are: a trace context's `traceparent` and
   * `tracestate` (SEP-414), so that the upstream's span of the call is a child of the caller's.
   * @default none: the request carries no `_meta` (but a `progressToken` when `onProgress` is given)
   */
  readonly meta?: Readonly<Record<string, unknown>>;
}

/** One upstream as `status()` shows it. */
export interface UpstreamStatus {
  /**
   * `connecting` before the first session opened; `ready` while sessions open; `down` while connects
   * fail, or sessions die right after connecting (see `reason`, `breaker`, `lastError`); `closed` after close.
   */
  readonly state: 'connecting' | 'ready' | 'down' | 'closed';
  /**
   * Why it is `down`: its connects fail, or its sessions close within `breaker.cooldownMs` of connecting
   * (a server that answers `initialize` and exits), which the breaker counts as failed connects.
   */
  readonly reason?: 'connect-failed' | 'closed-after-connect';
  /** The transport in use (`auto` until the probe has answered). */
  readonly transport: TransportKind | 'auto';
  /**
   * The protocol revision its last session settled on: `2026-07-28` for a stateless upstream (no session
   * on its side), else what `initialize` agreed on (`2025-11-25`, …). Absent until a session opened.
   */
  readonly protocolVersion?: string;
  readonly breaker: CircuitBreakerStatus;
  readonly sessions: {
    /** Sessions open now (idle + borrowed). */
    readonly live: number;
    readonly idle: number;
    readonly borrowed: number;
    /** Callers waiting for a session. */
    readonly waiting: number;
    /** Sessions opened since start-up (each ran `initialize`). */
    readonly opened: number;
    /** Connects tried since start-up, failed ones included. */
    readonly connectAttempts: number;
  };
  readonly calls: {
    readonly started: number;
    readonly succeeded: number;
    readonly failed: number;
    readonly inFlight: number;
    /** Milliseconds the ended calls took, summed (waiting for a session included): over `succeeded + failed`, their mean latency. */
    readonly totalMs: number;
  };
  /**
   * A stdio upstream's stderr over all its sessions: bytes read, lines handed to `onLog`, and bytes dropped
   * (the rest of lines past 8 KiB; lines past 256 KiB at once and 64 KiB a second).
   */
  readonly stderr?: { readonly bytes: number; readonly lines: number; readonly droppedBytes: number };
  readonly lastError: { readonly code: string; readonly message: string; readonly at: string } | undefined;
}

/**
 * One tool call through the pool, once it has ended, as `onCall` of `createSessionPool` receives it: for
 * metrics, so every field is bounded (no arguments, no result, no task).
 */
export interface UpstreamCall {
  /** The upstream's configured name. */
  readonly upstream: string;
  /** The tool's name on its upstream, as the caller asked for it. */
  readonly toolName: string;
  /** Whether the upstream's last tool list had `toolName`: a name it never listed may be anything a caller made up. */
  readonly listed: boolean;
  /** `ok`; `tool-error` when the upstream answered with `isError: true`; else the code the call failed with (`UPSTREAM_TIMEOUT`, `ABORTED`, …). */
  readonly outcome: 'ok' | 'tool-error' | KlymErrorCode;
  /** From the call to its end, waiting for a session included. */
  readonly durationMs: number;
}
