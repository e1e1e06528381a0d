/**
 * zod building blocks shared by the config section schemas (each area's `config.ts`): a leaf
 * that the areas import, apart from the assembled schema in config/, which imports the areas.
 */
import {z} from 'zod'
import {globProblem} from './glob.js'
import {normalizeCidr} from './net.js'
import {splitList} from './text.js'

/** A CIDR string (`10.0.0.0/8`, `2001:db8::/32`), validated and normalised by {@link normalizeCidr}. */
export const cidrString = z.string().transform((value, ctx) => {
  try {
    return normalizeCidr(value)
  } catch (error) {
    ctx.addIssue({code: z.ZodIssueCode.custom, message: (error as Error).message})
    return z.NEVER
  }
})

/**
 * A list of `item`, given either as an array of strings (YAML) or as one comma-separated
 * string (environment variables, flags); see {@link splitList}.
 */
export function listOf<T extends z.ZodTypeAny>(item: T) {
  return z.union([z.string().transform(splitList), z.array(z.string())]).pipe(z.array(item))
}

/** A list of picomatch globs on origin paths (see {@link listOf}), each checked by {@link globProblem}. */
export const globList = listOf(
  z.string().superRefine((value, ctx) => {
    const problem = globProblem(value)
    if (problem) ctx.addIssue({code: z.ZodIssueCode.custom, message: `not a valid glob: ${problem}`})
  }),
)
