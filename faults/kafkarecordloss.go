package faults

import "imlab/chaos"

// KafkaRecordLoss deletes the run's topic's records up to the end offsets.
type KafkaRecordLoss struct{}

// Name is "kafka_record_loss".
func (KafkaRecordLoss) Name() string { return "kafka_record_loss" }

// Params are the parameters kafka_record_loss takes.
func (KafkaRecordLoss) Params() []string { return nil }

// Unit is what the count of a kafka_record_loss counts.
func (KafkaRecordLoss) Unit() string { return "records deleted, already consumed or not" }

// CheckTarget: none.
func (KafkaRecordLoss) CheckTarget(field string, x Spec, _ Context) error { return noTarget(field, x) }

// CheckValues: a policy that uses Kafka.
func (KafkaRecordLoss) CheckValues(field string, x Spec, c Context) error {
	return needKafka(field, x, c)
}

// Build is the record loss on the run's topic.
func (KafkaRecordLoss) Build(_ Spec, env Env) (chaos.Fault, error) {
	adm, err := env.Kafka()
	if err != nil {
		return nil, err
	}
	return chaos.KafkaRecordLoss(adm, env.Topic), nil
}

// needKafka is the check of the Kafka kinds: the file uses Kafka.
func needKafka(field string, x Spec, c Context) error {
	if !c.UsesKafka {
		return invalid(field+".kind", "%s needs a policy that uses Kafka (store, outbox or queue)", x.Kind)
	}
	return nil
}
