/** The lease rows' history checks, shared with the chaos harness. */
export { overlaps, staleWrites, type Tenure, tenures } from '../../chaos/shard-leases.ts';
