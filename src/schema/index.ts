/** The GraphQL schema: every type file registers itself on the builder. */
import './scalars.ts';
import './errors.ts';
import './run.ts';
import './event.ts';
import './budget.ts';
import './lease.ts';
import './approval.ts';
import './claim.ts';
import './output.ts';
import './subscriptions.ts';
import './viewer.ts';
import { builder } from './builder.ts';

export const schema = builder.toSchema({ sortSchema: false });
