package inbox

// SetAfterCommit makes c call f between each message's commit and its
// ack: the crash test kills the process there.
func SetAfterCommit(c *Consumer, f func(Message)) { c.afterCommit = f }
