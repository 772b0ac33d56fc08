/** Sees every command the server's SDK clients send (both: the stores' and the rest), as tests count them. */
import type { Clients } from '../../src/table/client.ts';

export function onEveryCommand({ dynamo, cached }: Pick<Clients, 'dynamo' | 'cached'>, seen: (name: string, input: unknown) => void) {
  for (const client of [dynamo, cached])
    client.middlewareStack.add(
      (next, context) => (args) => {
        seen(context.commandName ?? 'unknown', args.input);
        return next(args);
      },
      // The cached client resolves its stack once per kind of command: added before the first is sent.
      { step: 'initialize', name: 'seeEveryCommand' },
    );
}
