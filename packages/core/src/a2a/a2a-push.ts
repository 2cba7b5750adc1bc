import { A2A_CONTENT_TYPE, StreamResponse, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import type { PushFormat, PushOptions, PushTarget } from '../webhooks/push-types.ts';
import type { PushTargetRequest } from '../webhooks/task-push.ts';
import { RESULT_ARTIFACT_ID, toA2aTask } from './a2a-task.ts';

const response = (payload: StreamResponse['payload']): unknown => StreamResponse.toJSON({ payload });

/**
 * A2A's push notification bodies (A2A §4.3.3): each a `StreamResponse` as JSON, `application/a2a+json` —
 * the events a `SubscribeToTask` stream sends, one per request: `{ task }` first (the task as it stood when
 * the config was stored: at its creation for a config given with `SendMessage`), then `{ statusUpdate }` at
 * its start (`WORKING`), at each question to its caller (`INPUT_REQUIRED`, the question as the status message)
 * and when it goes on after the answer (`WORKING`), `{ artifactUpdate }` with the `result` artifact when it
 * completed with an answer, and `{ statusUpdate }` at its end (`COMPLETED`, `FAILED` with the Klym code, `CANCELED`).
 */
export const a2aPushFormat: PushFormat = {
  contentType: A2A_CONTENT_TYPE,
  body(type, record) {
    const task = toA2aTask(record);
    switch (type) {
      case 'task.snapshot':
        return response({ $case: 'task', value: task });
      case 'task.result': {
        const artifact = task.artifacts.find((candidate) => candidate.artifactId === RESULT_ARTIFACT_ID);
        if (artifact === undefined) return undefined;
        return response({
          $case: 'artifactUpdate',
          value: { taskId: task.id, contextId: task.contextId, artifact, append: false, lastChunk: true, metadata: undefined },
        });
      }
      default:
        return response({ $case: 'statusUpdate', value: { taskId: task.id, contextId: task.contextId, status: task.status, metadata: task.metadata } });
    }
  },
};

/**
 * The task service's `push` options for A2A: the operator's allow-list and delivery settings, with A2A's
 * body format ({@link a2aPushFormat}).
 * @example
 * ```ts
 * createTaskService({ pool, push: a2aPush({ allow: ['https://hooks.example.com/a2a'] }) })
 * ```
 */
export function a2aPush(options: Omit<PushOptions, 'format'>): PushOptions {
  return { ...options, format: a2aPushFormat };
}

/** A caller's `TaskPushNotificationConfig` as the push target it asks for (`token` and `authentication` only when set). */
export function pushTargetRequestOf(config: TaskPushNotificationConfig): PushTargetRequest {
  const { authentication } = config;
  return {
    url: config.url,
    ...(config.id === '' ? {} : { id: config.id }),
    ...(config.token === '' ? {} : { token: config.token }),
    ...(authentication === undefined || authentication.scheme === ''
      ? {}
      : { authentication: { scheme: authentication.scheme, credentials: authentication.credentials } }),
  };
}

/** A task's push target as A2A's `TaskPushNotificationConfig`: as the caller gave it, with its id and task id. */
export function toPushConfig(taskId: string, target: PushTarget): TaskPushNotificationConfig {
  return {
    tenant: '',
    id: target.id,
    taskId,
    url: target.url,
    token: target.token ?? '',
    authentication: target.authentication === undefined ? undefined : { ...target.authentication },
  };
}
