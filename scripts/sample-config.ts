/**
 * Writes `contrib/mb.yaml`, the sample config file: every setting of the zod config schema
 * (`src/lib/config/schema.ts` and the section schemas it assembles), each under a one-line
 * comment taken from the field's `.describe()` text, with its default, commented out. Removing
 * the `#` right after a line's indentation turns a setting (and its section line) on.
 *
 * Usage: `npm run contrib` (writes the file), or
 * `node --import tsx scripts/sample-config.ts --check` (exit 1 when the file differs from the
 * schema). test/unit/contrib.test.ts runs the check.
 *
 * @throws Error naming the key when a setting has no `.describe()` text
 */
import {readFileSync, writeFileSync} from 'node:fs'
import {fileURLToPath, pathToFileURL} from 'node:url'
import {stringify} from 'yaml'
import {z} from 'zod'
import {ConfigSchema} from '../src/lib/config/schema.js'

/** Where the sample lives in the repository. */
export const SAMPLE_PATH = fileURLToPath(new URL('../contrib/mb.yaml', import.meta.url))

const HEADER = `# mb configuration file: every setting with its default. Generated from the config schema
# (src/lib/config/schema.ts) by \`npm run contrib\`; do not edit by hand.
#
# mb reads the first of: --config FILE, MB_CONFIG, $XDG_CONFIG_HOME/mb/mb.yaml
# (~/.config/mb/mb.yaml), /etc/mb/mb.yaml. Environment variables and flags override the file;
# \`mb config show\` prints the effective settings and where each came from.
# To change a setting, remove the '#' right after the indentation, on its line and on its
# section's line (e.g. 'serve:'). A setting with nothing after its colon is unset by default.
`

/** A schema field with its wrappers peeled off: description, default, and the inner type. */
interface Field {
  description?: string
  /** The default value; `undefined` when the field has none. */
  defaultValue?: unknown
  inner: z.ZodTypeAny
}

/** Peels ZodDefault/ZodOptional/ZodNullable/ZodEffects off `schema`, keeping the outermost description and default. */
function peel(schema: z.ZodTypeAny): Field {
  const field: Field = {inner: schema}
  let node: z.ZodTypeAny = schema
  for (;;) {
    field.description ??= node.description
    if (node instanceof z.ZodDefault) {
      if (!('defaultValue' in field)) field.defaultValue = node._def.defaultValue()
      node = node._def.innerType
    } else if (node instanceof z.ZodOptional || node instanceof z.ZodNullable) {
      node = node.unwrap()
    } else if (node instanceof z.ZodEffects) {
      node = node.innerType()
    } else {
      break
    }
  }
  field.inner = node
  return field
}

/** A value as one line of YAML (flow style for lists and maps). */
function yamlValue(value: unknown): string {
  if (value === undefined) return ''
  return ` ${stringify(value, {collectionStyle: 'flow', lineWidth: 0}).trim()}`
}

/** The lines of one object schema's settings, indented by `depth` levels; sections recurse. */
function renderObject(schema: z.AnyZodObject, path: string[], depth: number): string[] {
  const indent = '  '.repeat(depth)
  const lines: string[] = []
  for (const [key, value] of Object.entries(schema.shape as Record<string, z.ZodTypeAny>)) {
    const dotted = [...path, key].join('.')
    const field = peel(value)
    if (!field.description) throw new Error(`Setting ${dotted} has no description: add .describe('one line') to it in its schema (src/lib/config/schema.ts or the section's config.ts).`)
    lines.push('', `${indent}# ${field.description}`)
    if (field.inner instanceof z.ZodObject) {
      lines.push(`${indent}#${key}:`, ...renderObject(field.inner, [...path, key], depth + 1))
    } else {
      lines.push(`${indent}#${key}:${yamlValue(field.defaultValue)}`)
    }
  }
  return lines
}

/** The text of `contrib/mb.yaml` for the current schema. */
export function renderSampleConfig(): string {
  return `${HEADER}${renderObject(ConfigSchema.innerType(), [], 0).join('\n')}\n`
}

function main(): void {
  const text = renderSampleConfig()
  if (process.argv.includes('--check')) {
    let current = ''
    try {
      current = readFileSync(SAMPLE_PATH, 'utf8')
    } catch {
      // a missing file differs
    }
    if (current !== text) {
      process.stderr.write(`${SAMPLE_PATH} differs from the config schema; run \`npm run contrib\` and commit the result.\n`)
      process.exit(1)
    }
    return
  }
  writeFileSync(SAMPLE_PATH, text)
  process.stdout.write(`wrote ${SAMPLE_PATH}\n`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main()
