import { GraphQLError, Kind, print, type ValueNode } from 'graphql';
import { DateTimeResolver } from 'graphql-scalars';
import { builder } from './builder.ts';

/**
 * A JSON value written inline in a query. Only what JSON can hold is taken: a bare word
 * (`NaN`, `Infinity`, `foo`) or a variable inside the literal is refused, never stored as
 * nothing. (graphql-scalars' JSON drops both silently.)
 */
function jsonLiteral(node: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (node.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return node.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(node.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return node.values.map((value) => jsonLiteral(value, variables));
    case Kind.OBJECT: {
      // No prototype: a key such as `constructor` is a key like any other.
      const object: Record<string, unknown> = Object.create(null);
      for (const field of node.fields) object[field.name.value] = jsonLiteral(field.value, variables);
      return object;
    }
    case Kind.VARIABLE:
      // Refused, not filled in: one variable named in a thousand places of a literal would make
      // the request a thousand times its size, after every limit on its size was checked.
      throw new GraphQLError(
        `JSON: a variable ($${node.name.value}) inside a JSON literal is not taken: pass the whole value as one variable`,
        { nodes: node },
      );
    case Kind.ENUM:
      throw new GraphQLError(`JSON: ${print(node)} is not a JSON value (quote it to send a string)`, { nodes: node });
  }
}

/**
 * A JSON value on its way out, boxed: the executors take any value with a `then` for a promise
 * (a resolver's answer and a field's serialized value alike), so a payload `{ "if": ...,
 * "then": ... }` handed on as it is would fail the field. The box is what the result holds; it
 * is written as the value it holds (JSON.stringify calls toJSON).
 */
class JsonOut {
  constructor(readonly value: unknown) {}
  toJSON() {
    return this.value;
  }
}

/** What a resolver of a JSON field returns for `value` (boxed only when it looks like a promise). */
export const jsonOut = (value: unknown) => (value !== null && typeof value === 'object' && 'then' in value ? new JsonOut(value) : value);

builder.scalarType('JSON', {
  description: 'Any JSON value: an object, a list, a string, a number, true, false or null.',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: jsonLiteral,
});
builder.addScalarType('DateTime', DateTimeResolver);
