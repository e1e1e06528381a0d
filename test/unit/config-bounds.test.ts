/**
 * Every numeric setting has a lower and an upper bound in its schema (issue 46, item 14): a
 * value such as `1e12` is refused by the one schema that `mb config show`, the start of every
 * command and a reload of `mb serve` all read, with the key and the accepted range, instead of
 * passing the check and failing later with a raw error.
 */
import {expect} from 'chai'
import {z} from 'zod'
import {loadConfig} from '../../src/lib/config/index.js'
import {ConfigSchema} from '../../src/lib/config/schema.js'

/** Dotted keys of every number in `schema`, with the number's schema. */
function numbers(schema: z.ZodTypeAny, path = ''): Array<[string, z.ZodNumber]> {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return numbers(schema._def.innerType, path)
  if (schema instanceof z.ZodEffects) return numbers(schema._def.schema, path)
  if (schema instanceof z.ZodPipeline) return [...numbers(schema._def.in, path), ...numbers(schema._def.out, path)]
  if (schema instanceof z.ZodUnion) return (schema._def.options as z.ZodTypeAny[]).flatMap((o) => numbers(o, path))
  if (schema instanceof z.ZodArray) return numbers(schema._def.type, `${path}[]`)
  if (schema instanceof z.ZodObject) return Object.entries(schema.shape as Record<string, z.ZodTypeAny>).flatMap(([k, v]) => numbers(v, path ? `${path}.${k}` : k))
  if (schema instanceof z.ZodNumber) return [[path, schema]]
  return []
}

/** Numbers checked by other means: HTTP statuses (a pattern of three digits). */
const CHECKED_OTHERWISE = new Set(['select.verify_fail_statuses[]'])

describe('the bounds of numeric settings', () => {
  it('every numeric setting has a finite minimum and maximum', () => {
    const found = numbers(ConfigSchema)
    expect(found.length).to.be.greaterThan(60)
    const unbounded = found.filter(([key, n]) => !CHECKED_OTHERWISE.has(key) && (n.minValue === null || n.maxValue === null || !Number.isFinite(n.maxValue))).map(([key]) => key)
    expect(unbounded).to.deep.equal([])
  })

  it('refuses a value beyond the bound with the key and the accepted range, from the file, the environment or a flag', () => {
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'serve.max_connections_per_client': 1e12}})).to.throw(
      'setting serve.max_connections_per_client): expected an integer from 1 to 1000000, but received 1000000000000.',
    )
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'scan.timeout': Number.POSITIVE_INFINITY}})).to.throw(/expected a number above 0, at most 604800, but received Infinity/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.distance_factor': 1000}})).to.throw(/select\.distance_factor\): expected a number from 1 to 100, but received 1000/)
  })
})
