/** The lifecycle events a shared queue carries between processes. */
export type AnnouncedEvent = 'task-start' | 'task-resume' | 'task-end';

/**
 * How one task's run ended, as the queue that handed it out needs to know: `ended` — the task is finished
 * in the store (or already was, or is gone); `left` — it is still `pending` or `running` there (its run
 * was released, or the store could not take its end), for a later run to take up from its checkpoint.
 */
export type RunOutcome = 'ended' | 'left';

/**
 * Where a task waits among the others (issue #33, fair turns): its principal, and its rank — it is the
 * principal's `rank`-th task not yet ended (1-based) when it is queued. Waiting tasks start by rank, then
 * in arrival order: a principal's first waiting task starts before any principal's second (start-time fair
 * queueing), whichever process queued them.
 */
export interface TaskPlacement {
  readonly principal: string;
  readonly rank: number;
}

/** One run of a task that a {@link TaskQueue} hands this process. */
export interface TaskLease {
  readonly id: string;
  /**
   * Aborted when the run must stop: the task was cancelled (it is `cancelled` in the store already), or
   * the queue took it back from this process (see `released`).
   */
  readonly signal: AbortSignal;
  /**
   * Whether the queue took the task back (a graceful close handing it on, a lost lock): the run stops
   * and leaves the task `running` with its checkpoint for whoever takes it next, and records nothing more
   * of its own — no log entry, no checkpoint, no end.
   */
  released(): boolean;
  /**
   * Whether this process still holds the task, asked right before its run ends it in the store: a worker
   * whose lock was lost (another worker has the task, or will) must not end it.
   */
  holds(): Promise<boolean>;
}

/** What a {@link TaskQueue} hands tasks to: the task manager that opened it. */
export interface TaskConsumer {
  /** Runs at once in this process, at most; 0 takes none (a front: it starts, reads and cancels tasks). */
  readonly concurrency: number;
  /** Runs of `principal`'s tasks at once, at most (`tasks.perPrincipal.maxRunning`); `undefined`: no cap of its own. */
  runningLimit?(principal: string): number | undefined;
  /** Runs one task: starts it (`pending`), resumes it (`running`), or drops it (finished, gone). Never rejects. */
  run(lease: TaskLease): Promise<RunOutcome>;
  /** Cancels a task with the reason the manager is being closed with (an in-process queue's close). */
  cancel(id: string): Promise<void>;
  /**
   * Ends a `running` task the queue gave up on as `error` with `TASK_INTERRUPTED`; `why` words its message,
   * given the step the task's checkpoint reached.
   */
  interrupt(id: string, why: (step: number) => string): Promise<void>;
  /** Whether a task has ended, or is gone: asked for the runs of this process when a cancel may have been missed. */
  hasEnded(id: string): Promise<boolean>;
  /**
   * A task started, resumed or ended in another process that shares the queue: the manager tells its
   * listeners (`task-start`, `task-resume`, `task-end`) with the task as stored.
   */
  heardElsewhere(type: AnnouncedEvent, id: string): void;
}

/**
 * Where started tasks wait for a run, and which process runs them. The task manager's default keeps them
 * in its own process (`createInProcessTaskQueue`); a shared one (`createBullmqTaskQueue` of
 * `@klym/core/redis`) lets any number of processes start, cancel and run the tasks of one store. A queue
 * serves one manager, which opens it and closes it.
 */
export interface TaskQueue {
  /**
   * Whether other processes share it. Its tasks then outlive this process: closing hands running tasks
   * back to the queue instead of cancelling them, and leaves queued ones queued.
   */
  readonly shared: boolean;
  /** Starts handing `consumer` tasks to run. Called once, by the manager, before anything else. */
  open(consumer: TaskConsumer): void;
  /**
   * Queues a stored task, `pending` (or `running`, to be resumed), at its `placement` (without one, behind
   * every placed task of rank 1, as the first of an unknown principal). Adding a task that is queued or running
   * already changes nothing, but for a run that is ending (a task answered while the run that asked was ending):
   * the queue queues it again once that run has let it go — an add is never lost to a run about to end. (On a
   * shared queue that run also leaves it queued, `left`, when it finds it answered.)
   * @throws {KlymError} `STORE_UNAVAILABLE` when the queue cannot be reached
   */
  add(id: string, placement?: TaskPlacement): Promise<void>;
  /**
   * How many waiting tasks start before task `id` (0: it is next), in every process that shares the queue;
   * `undefined` when it is not waiting (running, ended, or unknown here).
   * @throws {KlymError} `STORE_UNAVAILABLE` when the queue cannot be reached
   */
  position(id: string): Promise<number | undefined>;
  /**
   * How many of `principal`'s tasks wait and run, when this queue holds every unfinished task of its store
   * (an in-process queue): counted from its own state, so a start costs no scan of the store. A shared
   * queue, which cannot tell, leaves it out and the store is asked.
   */
  usage?(principal: string): { readonly queued: number; readonly running: number };
  /**
   * Takes a task out of the queue and stops its run, in whichever process runs it. Its new status is
   * already stored; a run that cannot be reached now stops when its process learns of it.
   */
  cancel(id: string, reason: string): Promise<void>;
  /**
   * How many tasks wait to start, in every process that shares the queue.
   * @throws {KlymError} `STORE_UNAVAILABLE` when the queue cannot be reached
   */
  waiting(): Promise<number>;
  /** Whether a task added now would start at once in this process (its first `currentStep`); a shared queue cannot tell, and says no. */
  hasFreeSlot(): boolean;
  /**
   * A task started, resumed or ended in this process: a shared queue tells the other processes, whose
   * managers tell their listeners (an MCP session that started the task on a front is told of each
   * transition). Fire and forget.
   */
  announce(type: AnnouncedEvent, id: string): void;
  /**
   * Takes no more tasks, lets runs end within `graceMs`, then stops the rest: an in-process queue cancels
   * its queued and running tasks (`consumer.cancel`); a shared one hands its running tasks back to be
   * resumed elsewhere at once. Then it lets go of what it holds. Idempotent.
   */
  close(options: { readonly graceMs: number }): Promise<void>;
}
