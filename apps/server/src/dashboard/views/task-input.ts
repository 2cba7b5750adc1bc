import type { TaskInput } from '@klym/core';
import { html } from 'hono/html';
import { formatTime, type Html } from './format.ts';

/** The longest answer the form takes: `reply_to_agent_task`'s own limit. */
const MAX_ANSWER = 100_000;
/** The longest reason given with a decision (the same limit as `reply_to_agent_task`'s). */
const MAX_REASON = 10_000;

/** The call waiting for approval: its tool and its arguments (as the run stored them, redacted), whole. */
function callView(call: NonNullable<TaskInput['call']>): Html {
  return html`<p>Tool <code class="ask-tool">${call.toolName}</code> with the arguments:</p>
    <pre class="ask-args">${JSON.stringify(call.input ?? {}, null, 2)}</pre>`;
}

/**
 * What a task in `input_required` waits for: the question its run asked (or, for an approval, the tool
 * and the arguments it waits to call) and, for its owner, the form that answers it — a text box, or
 * Approve / Deny with a reason. Another viewer (an admin) sees what it waits for, not the form: the
 * answer is the owner's to give.
 */
export function inputSection(id: string, input: TaskInput, mayAnswer: boolean): Html {
  const approval = input.kind === 'approval';
  return html`<section class="ask" data-kind="${approval ? 'approval' : 'question'}">
    <h2>${approval ? 'Waiting for your approval' : 'Waiting for your answer'}</h2>
    <p class="meta">Asked at ${formatTime(input.askedAt)} (UTC)</p>
    ${approval && input.call !== undefined ? callView(input.call) : html`<p class="question">${input.question}</p>`}
    ${
      !mayAnswer
        ? html`<p class="meta">Only the task's principal can answer it.</p>`
        : approval
          ? html`<form method="post" action="/dashboard/tasks/${id}/reply" class="decide">
              <label for="reason">Reason (optional; the model reads it)</label>
              <input type="text" id="reason" name="reason" maxlength="${MAX_REASON}" autocomplete="off" />
              <div class="buttons">
                <button type="submit" name="decision" value="approve">Approve</button>
                <button type="submit" name="decision" value="deny" class="danger">Deny</button>
              </div>
            </form>`
          : html`<form method="post" action="/dashboard/tasks/${id}/reply" class="reply">
              <label for="answer">Your answer (the model reads it as the question's result)</label>
              <textarea id="answer" name="answer" rows="4" required maxlength="${MAX_ANSWER}"></textarea>
              <div class="buttons"><button type="submit">Send answer</button></div>
            </form>`
    }
  </section>`;
}
