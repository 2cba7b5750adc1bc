/** What is known of an artifact without reading it: a tool result kept whole, out of the conversation. */
export interface ArtifactInfo {
  /** `art_` and 12 hex digits, unique within its task. */
  readonly id: string;
  /** The namespaced tool whose result it is (`fs__read_text_file`, `klym__grep_artifact`). */
  readonly tool: string;
  /** UTF-8 bytes of its text. */
  readonly bytes: number;
  /** Lines of its text (a last line without a newline counts). */
  readonly lines: number;
  /** Tokens of its text, as the run counts them. */
  readonly tokens: number;
  /** ISO 8601. */
  readonly createdAt: string;
}

/** An artifact with its text, as a store keeps it. */
export interface StoredArtifact extends ArtifactInfo {
  readonly text: string;
}

/**
 * Where a task's artifacts are kept: its task store (`TaskStore.saveArtifact`, …), or a run's memory. Every
 * method is scoped to one task: an id of another task's artifact is not found.
 */
export interface ArtifactBackend {
  /** Keeps `artifact` whole; durable once it resolves. */
  save(artifact: StoredArtifact): Promise<void>;
  /** The artifact with its text; `undefined` for an id this task has not. */
  load(id: string): Promise<StoredArtifact | undefined>;
  /** Every artifact of the task, oldest first, without their text. */
  list(): Promise<readonly ArtifactInfo[]>;
}
