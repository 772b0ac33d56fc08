import { GraphQLError, Kind, print, type ValueNode } from 'graphql';
import { DateTimeResolver } from 'graphql-scalars';
import { builder } from './builder.ts';

/**
 * A JSON value written inline in a query. Only what JSON can hold is taken: a bare word
 * (`NaN`, `Infinity`, `foo`) or a variable that was not given is refused, never stored as
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
    case Kind.VARIABLE: {
      const value = variables?.[node.name.value];
      if (value === undefined) throw new GraphQLError(`JSON: variable $${node.name.value} is not given`, { nodes: node });
      return value;
    }
    case Kind.ENUM:
      throw new GraphQLError(`JSON: ${print(node)} is not a JSON value (quote it to send a string)`, { nodes: node });
  }
}

builder.scalarType('JSON', {
  description: 'Any JSON value: an object, a list, a string, a number, true, false or null.',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: jsonLiteral,
});
builder.addScalarType('DateTime', DateTimeResolver);
