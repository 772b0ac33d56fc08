/**
 * One run: header and budget (live through runChanged), who holds it (its claim, counted
 * down; a STALLED badge; Cancel for a key that may write), the approval panel, and the event
 * timeline with its live tail (runEvents), type filter and jump to seq, and beside it the
 * run's output streams as live text.
 */
import type { RunState } from '@runplane/client';
import { approvalPanel } from './approval.ts';
import { errorBox, fill, h } from './dom.ts';
import { time } from './format.ts';
import type { Page } from './main.ts';
import { createOutputs } from './outputs.ts';
import { isNewer } from './runs.ts';
import { createTail } from './tail.ts';
import { Timeline } from './timeline.ts';

/** A form's submit handled here, not by a page load. */
function submitted(event: Event, then: () => Promise<void>) {
  event.preventDefault();
  void then();
}

export const runPage: Page = (root, session, params) => {
  const runId = params.get('id') ?? '';
  const stop = new AbortController();
  let types = (params.get('types') ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  let run: RunState | undefined;

  const message = h('div', { class: 'message' });
  const header = h('section', { class: 'run-header', 'aria-label': 'Run' });
  const approval = h('section', { class: 'approval', 'aria-label': 'Approval' });
  const holding = h('section', { class: 'holding', 'aria-label': 'Worker' });
  const showError = (text: string) => fill(message, errorBox(text));
  const timeline = new Timeline({
    client: session.client,
    runId,
    onError: showError,
    onReachedEnd: () => tail.restart(types.length ? types : undefined),
  });
  const tail = createTail({ session, runId, timeline, onError: showError });
  const outputs = createOutputs({ session, runId });

  const typeInput = h('input', {
    id: 'type-filter',
    type: 'text',
    value: types.join(', '),
    placeholder: 'e.g. tool.called, approval.requested',
  });
  const seqInput = h('input', { id: 'jump-seq', type: 'number', min: 1, inputmode: 'numeric', size: 8 });
  const controls = h(
    'div',
    { class: 'timeline-controls' },
    h(
      'form',
      { on: { submit: (e) => submitted(e, applyTypes) } },
      h('label', { for: 'type-filter' }, 'Types'),
      typeInput,
      h('button', { type: 'submit' }, 'Filter'),
    ),
    h(
      'form',
      { on: { submit: (e) => submitted(e, jump) } },
      h('label', { for: 'jump-seq' }, 'Jump to seq'),
      seqInput,
      h('button', { type: 'submit' }, 'Go'),
    ),
    h('button', { type: 'button', on: { click: () => void latest() } }, 'Latest'),
    tail.element,
  );

  fill(
    root,
    h('p', {}, h('a', { href: '#/runs' }, '← Runs')),
    message,
    header,
    holding,
    approval,
    h('div', { class: 'run-body' }, h('div', { class: 'events' }, h('h2', {}, 'Events'), controls, timeline.element), outputs.element),
  );

  function drawHeader() {
    if (!run) return;
    const { budget } = run;
    fill(
      header,
      h('h1', {}, 'Run ', h('code', {}, run.id)),
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Status'),
        h('dd', {}, h('span', { class: `status status-${run.status}`, id: 'run-status' }, run.status)),
        h('dt', {}, 'Task'),
        h('dd', {}, run.task),
        h('dt', {}, 'Version'),
        h('dd', { id: 'run-version' }, String(run.version)),
        h('dt', {}, 'Created'),
        h('dd', {}, time(run.createdAt)),
        h('dt', {}, 'Updated'),
        h('dd', {}, time(run.updatedAt)),
      ),
      h(
        'div',
        { class: 'budget' },
        h('label', { for: 'budget-meter' }, `Budget: ${budget.spent} spent of ${budget.cap}, ${budget.remaining} remaining`),
        h('meter', { id: 'budget-meter', min: 0, max: Math.max(1, budget.cap), value: budget.spent, high: budget.cap * 0.8, optimum: 0 }),
      ),
    );
  }

  /** Who holds the run, and for how long still (counted down each second); a Cancel form for a key that may write. */
  const countdown = setInterval(() => drawClaim(), 1_000);
  const reasonInput = h('input', { id: 'cancel-reason', type: 'text', size: 30, placeholder: 'why (optional)' });
  const cancelOutcome = h('span', { class: 'outcome', role: 'status' });
  const cancelForm = h(
    'form',
    { class: 'cancel', on: { submit: (e) => submitted(e, cancelRun) } },
    h('label', { for: 'cancel-reason' }, 'Reason'),
    ' ',
    reasonInput,
    ' ',
    h('button', { type: 'submit', id: 'cancel-run', class: 'danger' }, 'Cancel run'),
    ' ',
    cancelOutcome,
  );
  function drawClaim() {
    if (!run) return;
    const claim = run.claim;
    const left = claim ? Math.max(0, Math.ceil((Date.parse(claim.expiresAt) - Date.now()) / 1000)) : 0;
    const finished = ['COMPLETED', 'FAILED', 'CANCELLED'].includes(run.status);
    const who =
      run.status === 'STALLED'
        ? h('p', { id: 'run-holder' }, 'Stalled: its worker stopped renewing its claim. A worker that claims it takes it over.')
        : claim && left > 0
          ? h(
              'p',
              { id: 'run-holder' },
              'Held by ',
              h('code', {}, claim.holder),
              ` (token ${claim.token}), `,
              h('span', { id: 'claim-left' }, `${left} s`),
              ' left',
            )
          : h('p', { id: 'run-holder' }, finished ? 'Finished.' : 'No worker holds it.');
    // Only the holder's line is redrawn (each second): the form stays in place, so a reason
    // being typed keeps its focus and its text.
    if (!holding.firstChild) holding.append(h('h2', {}, 'Worker'), h('div', { class: 'holder' }));
    const line = holding.querySelector('.holder');
    if (line) fill(line, who);
    const canCancel = session.canWrite && !finished;
    if (canCancel && !cancelForm.isConnected) holding.append(cancelForm);
    if (!canCancel) cancelForm.remove();
  }
  async function cancelRun() {
    const button = cancelForm.querySelector('button');
    if (button) button.disabled = true;
    try {
      const answer = await session.client.cancelRun({ runId, reason: reasonInput.value.trim() || null });
      if (answer.__typename === 'Run') fill(cancelOutcome, 'Cancelled.');
      else fill(cancelOutcome, errorBox(answer.__typename === 'StatusConflict' ? `The run is already ${answer.current}.` : answer.message));
    } catch (err) {
      fill(cancelOutcome, errorBox(`Not cancelled: ${err instanceof Error ? err.message : String(err)}`));
    } finally {
      if (button) button.disabled = false;
    }
  }

  let lastStatus: string | undefined;
  function update(next: RunState) {
    if (run && !isNewer(next, run)) return;
    run = next;
    drawHeader();
    drawClaim();
    if (next.status !== lastStatus) {
      lastStatus = next.status;
      void approvalPanel(approval, { session, run: next, onError: showError, signal: stop.signal });
    }
  }

  function keepTypesInUrl() {
    const query = types.length ? `?types=${encodeURIComponent(types.join(','))}` : '';
    history.replaceState(null, '', `#/run/${encodeURIComponent(runId)}${query}`);
  }

  async function applyTypes() {
    types = typeInput.value
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    keepTypesInUrl();
    await timeline.jump(1, types.length ? types : undefined);
    tail.restart(types.length ? types : undefined);
  }

  async function jump() {
    const seq = Number(seqInput.value);
    if (!Number.isInteger(seq) || seq < 1) return showError('Jump to seq: give a whole number from 1 up.');
    fill(message);
    await timeline.jump(seq, types.length ? types : undefined);
    tail.restart(types.length ? types : undefined);
  }

  async function latest() {
    await timeline.latest(types.length ? types : undefined);
    tail.restart(types.length ? types : undefined);
  }

  void (async () => {
    try {
      const read = await session.client.run(runId, { consistent: true, first: 0, signal: stop.signal });
      if (!read)
        return fill(
          root,
          h('h1', {}, 'Run not found'),
          errorBox(`There is no run "${runId}" for this key's tenant.`),
          h('a', { href: '#/runs' }, 'Back to the runs'),
        );
      update(read);
      await timeline.jump(1, types.length ? types : undefined);
      tail.restart(types.length ? types : undefined);
      for await (const state of session.client.runChanged(runId, { signal: stop.signal })) update(state);
    } catch (err) {
      if (!stop.signal.aborted) showError(`Following the run failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  })();
  return () => {
    stop.abort();
    clearInterval(countdown);
    tail.stop();
    outputs.stop();
  };
};
