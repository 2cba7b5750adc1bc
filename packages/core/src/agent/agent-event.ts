import type { KlymErrorCode } from '../errors.ts';
import type { UpstreamLogEntry } from '../pool/upstream-session.ts';
import type { ArtifactInfo } from '../artifacts/artifact-types.ts';
import type { CodeEvent } from '../code/code-tool.ts';
import type { AgentFinishReason, AgentRunResult, AgentUsage, BudgetName, ToolErrorCode } from './types.ts';

/** Every step of a run, as `onEvent` receives it. Never holds a secret. */
export type AgentEvent =
  | {
      readonly type: 'run-start';
      readonly model: string;
      /** Tools the model may call. */
      readonly tools: readonly string[];
      /** Tools that exist but a policy denies, with the policy. */
      readonly denied: readonly { readonly toolName: string; readonly policy: string }[];
      /** Upstreams that could not list their tools, with why. */
      readonly unavailable: readonly { readonly upstream: string; readonly error: string }[];
      readonly budget: AgentRunResult['budget'];
      /** When the run continues a checkpoint (`resume`): its `steps`, and the ids of the calls handed to the model as interrupted, outcome unknown. */
      readonly resumed?: { readonly fromStep: number; readonly interruptedCalls: readonly string[] };
    }
  | { readonly type: 'step-start'; readonly step: number }
  | {
      readonly type: 'llm-request';
      readonly step: number;
      readonly messages: number;
      readonly tools: number;
      /** The request's input tokens as Klym counts them (see `createContextWindow`); absent for the scripted model, which has no window. */
      readonly tokens?: number;
    }
  | { readonly type: 'llm-response'; readonly step: number; readonly finishReason: string; readonly usage: AgentUsage; readonly text: string }
  | { readonly type: 'tool-call'; readonly step: number; readonly toolCallId: string; readonly toolName: string; readonly args: unknown }
  | {
      readonly type: 'tool-result';
      readonly step: number;
      readonly toolCallId: string;
      readonly toolName: string;
      readonly durationMs: number;
      /** The upstream answered with `isError: true`. */
      readonly isError: boolean;
      /** The start of the result as the model reads it. */
      readonly preview: string;
    }
  | {
      readonly type: 'tool-error';
      readonly step: number;
      readonly toolCallId: string;
      readonly toolName: string;
      readonly durationMs: number;
      readonly code: ToolErrorCode;
      readonly message: string;
    }
  | {
      readonly type: 'tool-denied';
      readonly step: number;
      readonly toolCallId: string;
      readonly toolName: string;
      readonly policy: string;
      readonly reason: string;
    }
  | { readonly type: 'orphan-removed'; readonly step: number; readonly toolCallIds: readonly string[] }
  /** A tool result too big to send was kept whole as an artifact; the model was given a reference to it. */
  | {
      readonly type: 'artifact-kept';
      readonly step: number;
      readonly artifact: ArtifactInfo;
      /** Its first lines (five at most, each cut at 200 characters): what the dashboard shows of it. */
      readonly head: readonly string[];
    }
  /**
   * The conversation would have passed its share of the window: `results` older tool results were replaced
   * by their artifact's reference, then `steps` older steps folded into a digest.
   */
  | {
      readonly type: 'history-compacted';
      readonly step: number;
      readonly results: number;
      readonly steps: number;
      readonly tokensBefore: number;
      readonly tokensAfter: number;
    }
  /**
   * `klym__query_artifact` answered: its SQL, the rows and columns of its answer, the artifacts it read, and
   * how long it took (loading tables included); `kept` names the artifact a too-big answer was kept as.
   */
  | {
      readonly type: 'artifact-query';
      readonly step: number;
      readonly sql: string;
      readonly rows: number;
      readonly columns: number;
      readonly tables: readonly string[];
      readonly elapsedMs: number;
      readonly kept?: string;
    }
  /** `klym__map_artifact` answered on every chunk of an artifact; its model calls' usage, counted in the run's. */
  | { readonly type: 'artifact-map'; readonly step: number; readonly artifact: ArtifactInfo; readonly chunks: number; readonly usage: AgentUsage }
  | {
      /** The provider refused the step's request as too long: the oldest tool results were dropped from what is sent, and it was sent once more. */
      readonly type: 'context-shrunk';
      readonly step: number;
      /** Tool results dropped by this shrink (they stay dropped for the rest of the run). */
      readonly droppedResults: number;
      /** The refused request's tokens, as the provider counted them (else as Klym did). */
      readonly tokensBefore: number;
      /** The request's tokens after the shrink, as Klym counts them. */
      readonly tokens: number;
      /** The model's context window, in tokens (the provider's, when it said it). */
      readonly window: number;
      readonly reason: string;
    }
  /**
   * A `klym__run_code` program (its call's `toolCallId`): `code-start` with its source, a `code-call` per host call
   * (its number, the function, the tool or artifact, its time and the bytes given to the program), `code-log` per
   * `log()`, and `code-end` with its calls, time and answer's size, or why it failed.
   */
  | (CodeEvent & { readonly step: number })
  | { readonly type: 'step-end'; readonly step: number; readonly usage: AgentUsage; readonly costUsd: number | undefined; readonly elapsedMs: number }
  | { readonly type: 'budget'; readonly name: BudgetName; readonly limit: number; readonly used: number }
  | { readonly type: 'upstream-log'; /** The step whose tool call the upstream was serving. */ readonly step?: number; readonly entry: UpstreamLogEntry }
  | {
      readonly type: 'run-end';
      readonly finishReason: AgentFinishReason | 'error';
      readonly steps: number;
      readonly usage: AgentUsage;
      readonly costUsd: number | undefined;
      readonly elapsedMs: number;
      /** Why the run failed, when `finishReason` is `error` (the run then rejects with it). */
      readonly error?: { readonly code: KlymErrorCode; readonly message: string };
    };
