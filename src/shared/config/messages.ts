import type { z } from 'zod';
import { settingName } from './environment';

const typeNames: Record<string, string> = {
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping of settings',
};

/** zod's own wording ("Invalid input: expected number, received string") says too little; the schema's own messages say enough. */
const zodDefaultMessage = /^(Invalid|Too (big|small)|Unrecognized)/;

/** One zod issue as the operator's one line. */
export function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') {
    return `unknown setting ${settingName([...issue.path, issue.keys[0]!])}: config/default.yaml lists every setting`;
  }
  const name = settingName(issue.path);
  if (zodDefaultMessage.test(issue.message)) {
    switch (issue.code) {
      case 'invalid_value':
        return `invalid setting ${name}: must be one of ${issue.values.map(String).join(', ')}`;
      case 'invalid_type':
        if (issue.message.endsWith('received undefined'))
          return `missing setting ${name}: must be ${typeNames[issue.expected] ?? issue.expected}`;
        return `invalid setting ${name}: must be ${typeNames[issue.expected] ?? issue.expected}`;
      case 'too_small':
        if (issue.origin === 'string') {
          return `invalid setting ${name}: ${issue.minimum === 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`}`;
        }
        break;
      case 'invalid_key':
        return `invalid setting ${name}: ${issue.issues[0]?.message ?? issue.message}`;
      default:
        break;
    }
  }
  return `invalid setting ${name}: ${issue.message}`;
}
