/**
 * The approval panel: for a run AWAITING_APPROVAL, what was asked and (for a key that may
 * write) approve / reject; otherwise the last decision, if any. Who decided is the deciding
 * key's name, recorded by the server (appendEvent cannot write `approval.resolved`), never a
 * name typed here. A decision is sent with one idempotency key, so a retry is applied once; of
 * two approvers the slower one is told who won.
 */
import { newIdempotencyKey, operations, type RunState } from '@runplane/client';
import { errorBox, fill, h } from './dom.ts';
import { json } from './format.ts';
import type { Session } from './session.ts';

interface PanelOptions {
  session: Session;
  run: RunState;
  onError: (message: string) => void;
  signal: AbortSignal;
}

/** The last event of `type` that the server wrote itself (one written by anything else is not a decision). */
async function lastEvent({ session, run }: PanelOptions, type: string) {
  const { run: found } = await session.client.request(operations.RunEventPage, { id: run.id, last: 20, types: [type] });
  return found?.events.edges.findLast((edge) => edge.node.origin === 'SERVER')?.node;
}

export async function approvalPanel(panel: HTMLElement, options: PanelOptions) {
  const { session, run } = options;
  try {
    if (run.status !== 'AWAITING_APPROVAL') {
      const decided = await lastEvent(options, 'approval.resolved');
      if (options.signal.aborted) return;
      if (!decided) return fill(panel);
      const { approved, by, reason } = (decided.payload ?? {}) as { approved?: unknown; by?: unknown; reason?: unknown };
      const who = typeof by === 'string' ? `key ${by}` : 'an unnamed key';
      const why = typeof reason === 'string' && reason ? `: ${reason}` : '';
      return fill(
        panel,
        h('h2', {}, 'Approval'),
        h('p', { id: 'decision' }, `${approved === true ? 'Approved' : 'Rejected'} by ${who}${why} (seq ${decided.seq}).`),
      );
    }
    const asked = await lastEvent(options, 'approval.requested');
    if (options.signal.aborted) return;
    const request = (asked?.payload as { request?: unknown } | undefined)?.request;
    fill(
      panel,
      h('h2', {}, 'Approval requested'),
      h('pre', { class: 'json' }, json(request ?? null)),
      session.canWrite ? decisionForm(panel, options) : h('p', {}, 'This key is read-only: it may not decide.'),
    );
  } catch (err) {
    options.onError(`Reading the approval failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function decisionForm(panel: HTMLElement, { session, run }: PanelOptions) {
  const reason = h('textarea', { id: 'reason', rows: 2, cols: 40 });
  const outcome = h('div', { class: 'outcome', role: 'status' });
  // One key per decision on this version: a retry (or a double click) is applied once.
  const idempotencyKey = newIdempotencyKey();
  const decide = async (approve: boolean) => {
    for (const button of panel.querySelectorAll('button')) button.disabled = true;
    try {
      const answer = await session.client.resolveApproval({
        runId: run.id,
        approve,
        reason: reason.value.trim() || null,
        expectedVersion: run.version,
        idempotencyKey: `${idempotencyKey}-${approve ? 'yes' : 'no'}`,
      });
      if (answer.__typename === 'Run') fill(outcome, `${approve ? 'Approved' : 'Rejected'}: the run is ${answer.status}.`);
      else if (answer.__typename === 'StatusConflict')
        fill(outcome, errorBox(`Another decision came first: the run is now ${answer.current}.`));
      else fill(outcome, errorBox(answer.message));
    } catch (err) {
      fill(outcome, errorBox(`The decision was not sent: ${err instanceof Error ? err.message : String(err)}`));
      for (const button of panel.querySelectorAll('button')) button.disabled = false;
    }
  };
  return h(
    'form',
    { class: 'decision', on: { submit: (e) => e.preventDefault() } },
    h('p', { id: 'approver' }, `Decided as key ${session.keyName}.`),
    h('label', { for: 'reason' }, 'Reason (optional)'),
    reason,
    h(
      'div',
      {},
      h('button', { type: 'button', id: 'approve', on: { click: () => void decide(true) } }, 'Approve'),
      ' ',
      h('button', { type: 'button', id: 'reject', class: 'danger', on: { click: () => void decide(false) } }, 'Reject'),
    ),
    outcome,
  );
}
