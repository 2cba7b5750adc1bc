import { isKlymError } from '../errors.ts';

/** A JSON-RPC error as plain data, for either SDK line to throw as its own error type. */
export interface Refusal {
  readonly code: number;
  readonly message: string;
  readonly data: { readonly code: string };
}

/**
 * A task start that could not be made, as the JSON-RPC error a task-creating call answers: `-32602` naming
 * the argument for a bad one, `-32603` with the Klym code otherwise (e.g. `TASK_QUEUE_FULL: …`).
 */
export function startRefusal(error: unknown): Refusal {
  if (isKlymError(error, 'INVALID_ARGUMENT')) return { code: -32602, message: error.message, data: { code: error.code } };
  if (isKlymError(error)) return { code: -32603, message: `${error.code}: ${error.message}`, data: { code: error.code } };
  return { code: -32603, message: `Klym failed: ${error instanceof Error ? error.message : String(error)}`, data: { code: 'INTERNAL' } };
}
