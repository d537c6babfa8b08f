// One bounded schema for the structured-output tests, as JSON Schema and as zod: every string
// and array has a maximum, so even a random-weight model under the grammar finishes the object.
import assert from 'node:assert/strict';
import { z } from 'zod';

export const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] }, maxItems: 2 },
    city: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 5 }] },
  },
  required: ['name', 'age', 'tags', 'city'],
  additionalProperties: false,
};

export const personZod = z.object({
  name: z.string().max(8),
  age: z.number().int().min(0).max(120),
  tags: z.array(z.enum(['a', 'b'])).max(2),
  city: z.string().max(5).nullable(),
});

// The object has exactly the schema's keys, in order, each within its bounds.
export function checkPerson(p) {
  assert.deepEqual(Object.keys(p), ['name', 'age', 'tags', 'city']);
  assert.ok(typeof p.name === 'string' && [...p.name].length <= 8, p.name);
  assert.ok(Number.isInteger(p.age) && p.age >= 0 && p.age <= 120, String(p.age));
  assert.ok(Array.isArray(p.tags) && p.tags.length <= 2 && p.tags.every((t) => t === 'a' || t === 'b'));
  assert.ok(p.city === null || (typeof p.city === 'string' && [...p.city].length <= 5));
}
