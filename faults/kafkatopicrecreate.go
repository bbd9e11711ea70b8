package faults

import "imlab/chaos"

// KafkaTopicRecreate deletes the run's topic and creates it again.
type KafkaTopicRecreate struct{ kafkaKind }

// Name is "kafka_topic_recreate".
func (KafkaTopicRecreate) Name() string { return "kafka_topic_recreate" }

// Unit: the records dropped with the topic (consumed ones too, so not
// the messages lost).
func (KafkaTopicRecreate) Unit() string {
	return "records dropped with the topic, already consumed or not"
}

// Build is the re-creation of the run's topic.
func (KafkaTopicRecreate) Build(_ Spec, env Env) (chaos.Fault, error) {
	return kafkaFault(env, chaos.KafkaTopicRecreate)
}
