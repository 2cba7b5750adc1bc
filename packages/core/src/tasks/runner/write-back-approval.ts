import { deniedCallText, type AskedQuestion } from '../../agent/ask-caller.ts';
import { clipText } from '../../internal/clip-text.ts';
import { namespaceToolName } from '../../pool/tool-name.ts';
import { approvalRule } from '../../tools/tool-policy.ts';
import type { TaskInput, TaskPatch, TaskRecord, WriteBackOutcome } from '../store/task-types.ts';
import type { TaskRunDefaults } from './task-run.ts';
import type { ResolvedWriteBack } from './write-back.ts';

/** The `toolCallId` of a task's input when what waits for approval is the write-back of its result. */
export const WRITE_BACK_CALL_ID = 'write-back';

/** How much of the result an approval of its write-back shows (the task's result holds it whole). */
const SHOWN_RESULT_CHARS = 500;

/**
 * The approval a task's write-back waits for: when the write (`add_node` on the write-back's upstream) matches
 * `tools.approval` — the task's, which holds the server's, or the upstream's own rules — as a call the run made
 * would. `undefined` when it needs none.
 */
export function writeBackApproval(
  task: TaskRecord,
  text: string,
  settings: {
    readonly defaults: TaskRunDefaults;
    readonly writeBack: ResolvedWriteBack;
  },
): AskedQuestion | undefined {
  const { upstream } = settings.writeBack;
  const toolName = namespaceToolName(upstream, 'add_node');
  const tool = { name: toolName, originalName: 'add_node', upstream, inputSchema: { type: 'object' as const } };
  const rule = approvalRule(tool, { selection: task.request.tools ?? settings.defaults.tools ?? {}, upstreams: settings.defaults.upstreamTools ?? {} });
  if (rule === undefined) return undefined;
  const nodeId = `klym_${task.id}`;
  return {
    toolCallId: WRITE_BACK_CALL_ID,
    kind: 'approval',
    question: `Approve writing this task's result into the graph (${toolName}: an Analysis node ${nodeId}, ${text.length} characters; ${rule})?`,
    call: { toolName, input: { node_type: 'Analysis', node_id: nodeId, full_text: clipText(text, SHOWN_RESULT_CHARS) } },
  };
}

/** Whether a task's input is the approval of its write-back. */
export const isWriteBackApproval = (input: TaskInput | undefined): boolean => input?.kind === 'approval' && input.toolCallId === WRITE_BACK_CALL_ID;

/** How a task whose write-back was decided ends: completed, its write `pending` (approved) or `failed` with the denial. */
export function decidedWriteBack(task: TaskRecord): TaskPatch {
  const nodeId = `klym_${task.id}`;
  const writeBack: WriteBackOutcome =
    task.input?.approved === true
      ? { status: 'pending', nodeId, dayId: '' }
      : { status: 'failed', nodeId, dayId: '', error: deniedCallText(task.input?.reason).replace('The call was not sent.', 'The result was not written.') };
  return { status: 'completed', currentStep: 'done', writeBack };
}
