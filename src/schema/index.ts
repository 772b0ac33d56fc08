/** The GraphQL schema: every type file registers itself on the builder. */
import './scalars.ts';
import './errors.ts';
import './run.ts';
import './event.ts';
import './budget.ts';
import './lease.ts';
import './approval.ts';
import './claim.ts';
import './viewer.ts';
import { builder } from './builder.ts';
import { eventResolvers } from './subscriptions.ts';

export const schema = builder.toSchema({ sortSchema: false });

// A subscription's arguments are validated once, when it subscribes; Pothos would validate them
// again around every event's resolve (its argMappers wrap resolve as well as subscribe), a tenth
// of a catch-up's time. The resolvers read only the event, so they run as written.
const subscriptionFields = schema.getSubscriptionType()?.getFields() ?? {};
for (const [name, resolve] of Object.entries(eventResolvers)) {
  const field = subscriptionFields[name];
  if (!field) throw new Error(`no subscription field ${name}`);
  field.resolve = resolve as never;
}
