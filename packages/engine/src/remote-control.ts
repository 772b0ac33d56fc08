/**
 * Fault injection and controls for an engine in another process: a parent that spawned
 * `npm run engine` with an IPC channel (child_process `stdio: [..., 'ipc']`) sends these
 * messages and gets an answer with the same `id`. Nothing is reachable over the network.
 */
import type { FaultRule, InjectedFault } from './faults.ts';
import type { Engine } from './index.ts';

export type ControlRequest =
  | { id: number; op: 'inject'; rule: FaultRule }
  | { id: number; op: 'remove'; fault: number }
  | { id: number; op: 'clear' }
  | { id: number; op: 'expireIterators'; table: string }
  | { id: number; op: 'rolloverShard'; table: string }
  | { id: number; op: 'collectGarbage' };

export interface ControlAnswer {
  id: number;
  ok: boolean;
  /** inject: the fault's number, for `remove`. */
  fault?: number;
  /** remove: how many calls the fault affected. */
  hits?: number;
  error?: string;
}

export function serveRemoteControl(engine: Engine, channel: NodeJS.Process = process) {
  if (!channel.send) return;
  const faults = new Map<number, InjectedFault>();
  let lastFault = 0;
  channel.on('message', async (message: ControlRequest) => {
    const answer = (body: Omit<ControlAnswer, 'id'>) => channel.send?.({ id: message.id, ...body });
    try {
      switch (message.op) {
        case 'inject':
          faults.set(++lastFault, engine.faults.inject(message.rule));
          return answer({ ok: true, fault: lastFault });
        case 'remove': {
          const fault = faults.get(message.fault);
          fault?.remove();
          faults.delete(message.fault);
          return answer({ ok: true, hits: fault?.hits ?? 0 });
        }
        case 'clear':
          engine.faults.clear();
          faults.clear();
          return answer({ ok: true });
        case 'expireIterators':
          await engine.control.expireIterators(message.table);
          return answer({ ok: true });
        case 'rolloverShard':
          engine.control.rolloverShard(message.table);
          return answer({ ok: true });
        case 'collectGarbage': {
          // Benchmarks compare memory after a full collection, so that where the collector
          // happened to be does not decide the figure. Needs node --expose-gc.
          const gc = (globalThis as { gc?: () => void }).gc;
          if (!gc) return answer({ ok: false, error: 'collectGarbage needs the engine started with node --expose-gc' });
          gc();
          return answer({ ok: true });
        }
        default:
          return answer({ ok: false, error: `unknown control ${(message as { op: string }).op}` });
      }
    } catch (err) {
      return answer({ ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  });
}
