package faults

import "imlab/chaos"

// KafkaTopicRecreate deletes the run's topic and creates it again.
type KafkaTopicRecreate struct{}

// Name is "kafka_topic_recreate".
func (KafkaTopicRecreate) Name() string { return "kafka_topic_recreate" }

// Params are the parameters kafka_topic_recreate takes.
func (KafkaTopicRecreate) Params() []string { return nil }

// Unit is what the count of a kafka_topic_recreate counts.
func (KafkaTopicRecreate) Unit() string {
	return "records dropped with the topic, already consumed or not"
}

// CheckTarget: none.
func (KafkaTopicRecreate) CheckTarget(field string, x Spec, _ Context) error {
	return noTarget(field, x)
}

// CheckValues: a policy that uses Kafka.
func (KafkaTopicRecreate) CheckValues(field string, x Spec, c Context) error {
	return needKafka(field, x, c)
}

// Build is the re-creation of the run's topic.
func (KafkaTopicRecreate) Build(_ Spec, env Env) (chaos.Fault, error) {
	adm, err := env.Kafka()
	if err != nil {
		return nil, err
	}
	return chaos.KafkaTopicRecreate(adm, env.Topic), nil
}
