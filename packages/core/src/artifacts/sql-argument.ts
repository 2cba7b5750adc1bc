import { z } from 'zod';

/** The longest SQL query an agent or a caller may send over the artifacts. */
export const MAX_SQL_CHARS = 20_000;

/**
 * The `sql` argument of the two query tools, the agent's over its own artifacts and the caller's over a task's
 * (`query_task_artifact`, `POST /api/tasks/:id/query`): one DuckDB query of 1 to {@link MAX_SQL_CHARS} characters,
 * described for whoever reads the tool's schema.
 */
export const sqlArgument = (description: string): z.ZodString => z.string().min(1).max(MAX_SQL_CHARS).describe(description);
