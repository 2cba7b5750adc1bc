import type { Tool } from '@modelcontextprotocol/client';

/**
 * An upstream's tool list: the last good listing, and a refresh when one is due (none yet, the upstream
 * said its list changed, a session broke). One listing runs at a time, shared by every caller. While a
 * refresh is due the last good list is still served: the refresh needs a session, and waiting for one
 * behind long tool calls would stall every new task, or leave it with no tools at all. Internal to the
 * session pool.
 */
export class ToolCache {
  readonly #list: () => Promise<readonly Tool[]>;
  #tools: readonly Tool[] | undefined;
  /** The names of the last good list, for `has`. */
  #names: ReadonlySet<string> = new Set();
  #due = true;
  /** Counts announced changes, so that a listing that began before one does not clear it. */
  #changes = 0;
  #refreshing: Promise<readonly Tool[]> | undefined;

  /** `list` lists the upstream's tools on a session. */
  constructor(list: () => Promise<readonly Tool[]>) {
    this.#list = list;
  }

  /** Whether a last good list is served now by `get({ fresh })`, with no listing to wait for. */
  serves({ fresh = false } = {}): boolean {
    return this.#tools !== undefined && !(fresh && this.#due);
  }

  /** Whether the last good list has a tool of this name (false before any listing). */
  has(name: string): boolean {
    return this.#names.has(name);
  }

  /** Whether a listing is under way. */
  get refreshing(): boolean {
    return this.#refreshing !== undefined;
  }

  /**
   * The tools: the last good list at once, starting the refresh that is due in the background; or, when
   * there is none yet or `fresh` wants no stale list, the outcome of a listing.
   */
  get({ fresh = false } = {}): Promise<readonly Tool[]> {
    if (!this.serves({ fresh })) return this.refresh();
    // A background refresh that fails leaves the refresh due, and the last good list served.
    if (this.#due) this.refresh().catch(() => {});
    return Promise.resolve(this.#tools as readonly Tool[]);
  }

  /** The list may have changed: it is still served, and listed again at the next `get()`. */
  invalidate(): void {
    this.#due = true;
    this.#changes++;
  }

  /** Lists the tools now, or joins the listing under way. */
  refresh(): Promise<readonly Tool[]> {
    this.#refreshing ??= this.#listOnce().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #listOnce(): Promise<readonly Tool[]> {
    const changes = this.#changes;
    const tools = await this.#list();
    this.#tools = tools;
    this.#names = new Set(tools.map((tool) => tool.name));
    // A change announced while listing may have come too late for this answer.
    this.#due = this.#changes !== changes;
    return tools;
  }
}
