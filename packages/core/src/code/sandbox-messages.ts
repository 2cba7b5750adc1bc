/** The program a warm thread is given to run. */
export interface SandboxProgram {
  readonly code: string;
  /** The host functions' names, each a global of the program. */
  readonly names: readonly string[];
  readonly memoryMiB: number;
}

/** The thread's messages: ready (QuickJS loaded), a host call the program awaits, or how the program ended. */
export type FromSandboxThread =
  | { readonly type: 'ready' }
  | { readonly type: 'call'; readonly id: number; readonly name: string; readonly args: string }
  | { readonly type: 'ended'; readonly answer?: { readonly kind: 'text' | 'json'; readonly text: string } }
  /** `memory`: QuickJS's allocator refused past the limit. `message`: `Name: message` of what the program threw. */
  | { readonly type: 'failed'; readonly memory: boolean; readonly message: string };

/** The program to run (once), or a host call's answer: JSON text (`undefined`: it answered nothing) or the error the program is given. */
export type ToSandboxThread =
  | ({ readonly type: 'start' } & SandboxProgram)
  | { readonly type: 'answer'; readonly id: number; readonly value?: string; readonly error?: { readonly name: string; readonly message: string } };
