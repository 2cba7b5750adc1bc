/** What a program's thread is started with. */
export interface SandboxThreadData {
  readonly code: string;
  /** The host functions' names, each a global of the program. */
  readonly names: readonly string[];
  readonly memoryMiB: number;
}

/** The thread's messages: a host call the program awaits, or how the program ended. */
export type FromSandboxThread =
  | { readonly type: 'call'; readonly id: number; readonly name: string; readonly args: string }
  | { readonly type: 'ended'; readonly answer?: { readonly kind: 'text' | 'json'; readonly text: string } }
  /** `memory`: QuickJS's allocator refused past the limit. `message`: `Name: message` of what the program threw. */
  | { readonly type: 'failed'; readonly memory: boolean; readonly message: string };

/** A host call's answer, as JSON text (`undefined`: the call answered nothing), or the error the program is given. */
export interface ToSandboxThread {
  readonly id: number;
  readonly value?: string;
  readonly error?: { readonly name: string; readonly message: string };
}
